package warm

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// clearRefused is the phase that looks for stale allocations of the
// class's free addresses in MetalLB (stale.Clearer) when MetalLB refused a
// warm placeholder of family f for lack of room.
func (w *warmer) clearRefused(f iadv1alpha1.IPFamily) phase.Phase[*warmScope] {
	return phase.Phase[*warmScope]{Name: "clearRefused " + string(f), Run: func(ctx context.Context, s *warmScope) (phase.Result, error) {
		d := w.draw(s, f)
		var since time.Time
		var refused []*corev1.Service
		for _, ph := range s.phs {
			if ph.Annotations[marks.AnnotationFamily] != string(f) || ph.DeletionTimestamp != nil || draw.AssignedIP(ph, f) != "" {
				continue
			}
			failure, err := d.Refusal(ctx, ph)
			if err != nil {
				return phase.Next(), err
			}
			if failure == nil || stale.UnknownPool(failure.Message) {
				continue
			}
			refused = append(refused, ph)
			if t := stale.EventFirstTime(failure); since.IsZero() || t.Before(since) {
				since = t
			}
		}
		if since.IsZero() {
			return phase.Next(), nil
		}
		now := time.Now()
		inBook := w.shared.Draws.Of(s.name).Draws(now)
		drawn, err := draw.DrawnPlaceholders(ctx, w.Client, w.PlaceholderNamespace, s.name)
		if err != nil {
			return phase.Next(), err
		}
		taken := draw.Unrecorded(drawn, f, draw.ViewOf(s.addrs, s.name, f).Records) + draw.InFlight(inBook, f, drawn, now)
		// The refused placeholder is one of the draws: room for it means
		// the ledger and the other draws leave at least one address free.
		full, _, _ := draw.ClassFull(s.class, f, draw.ViewOf(s.addrs, s.name, f).Entries, taken-1)
		wait, err := (&stale.Clearer{Deps: w.Deps, Cleared: &w.shared.Cleared}).ClearFree(ctx, s.class, f, s.addrs, full, since, refused)
		if wait > 0 {
			return phase.RetryAfter(wait, "MetalLB refuses warm placeholders while the ledger shows room"), err
		}
		// The class looked full, counting the draws in flight of this
		// controller's book. No watch event comes when one settles, and
		// MetalLB does not retry the refused placeholder: look again.
		return phase.RetryAfter(stale.Wait, "MetalLB refused a warm placeholder and the class looks full"), err
	}}
}
