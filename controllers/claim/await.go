package claim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// waitForMetalLB is the result of a family whose placeholder waits for
// MetalLB; the placeholder's own status change brings the claim back.
var waitForMetalLB = awaitingMetalLB(0)

// awaitingMetalLB is waitForMetalLB with a look after fallback in case
// MetalLB stays silent.
func awaitingMetalLB(fallback time.Duration) phase.Result {
	return phase.WaitFor("MetalLB to assign the placeholder an address", fallback)
}

// metallbQuiet is how long a placeholder waits for MetalLB's first answer
// before its claim is told it waits (WaitingForMetalLB). A healthy MetalLB
// answers well within it, even behind a burst of a thousand claims, and
// the claim already says Bound=False (WaitingForProvisioning) meanwhile:
// the Event is for a MetalLB that is down or stuck, not a second request
// on every claim's way to Bound.
const metallbQuiet = 15 * time.Second

// awaitMetalLB waits for MetalLB's answer to ph, telling the claim once
// it has waited metallbQuiet (from the placeholder's creation, so a
// restarted controller tells at once).
func (r *Reconciler) awaitMetalLB(s *scope, f iadv1alpha1.IPFamily, ph *corev1.Service, now time.Time) phase.Result {
	if left := metallbQuiet - now.Sub(ph.CreationTimestamp.Time); left > 0 {
		return awaitingMetalLB(left)
	}
	r.report(s.claim, string(f), corev1.EventTypeNormal, ReasonWaitingForMetalLB, msgWaitingForMetalLB(f, s.class.Name))
	return waitForMetalLB
}

// observe is the draw's step while MetalLB has assigned nothing: keep the
// placeholder drawing from the class pool, and tell the claim's owner when
// MetalLB refuses it. MetalLB retries by itself when addresses free up or
// pools change.
func (r *Reconciler) observe(ctx context.Context, fs *familyScope) (phase.Result, error) {
	if fs.step != stepWaitForMetalLB {
		return phase.Next(), nil
	}
	s, f, ph := fs.scope, fs.f, fs.ph
	d := r.draw(s, f)
	if pool := names.PoolName(s.class.Name); marks.Of(ph).Pool != pool || !marks.Of(ph).Granted(s.class.Name) {
		if err := d.PatchPlaceholder(ctx, ph, func() {
			if ph.Annotations == nil {
				ph.Annotations = map[string]string{}
			}
			ph.Annotations[marks.KeyClass] = s.class.Name
			// The class pool admits only placeholders carrying the grant label.
			marks.Edit(ph, func(m *marks.Marks) { m.Pool, m.Grant = pool, s.class.Name })
		}); err != nil {
			return phase.Next(), fmt.Errorf("point placeholder %s at pool %s: %w", ph.Name, pool, err)
		}
		return waitForMetalLB, nil
	}
	failure, err := d.Refusal(ctx, ph)
	if err != nil {
		return waitForMetalLB, err
	}
	if failure == nil {
		return r.awaitMetalLB(s, f, ph, time.Now()), nil
	}
	reason, msg := allocationFailure(f, s.class.Name, failure.Message)
	if reason == ReasonPoolNotReady {
		refusal, err := r.classRefusal(ctx, s.class)
		if err != nil {
			return phase.Next(), err
		}
		if refusal != "" {
			msg = msgClassRefused(f, s.class.Name, refusal)
		}
	}
	// Once per change: MetalLB says the same on every pass, and each pass
	// must not count another exhaustion.
	if r.report(s.claim, string(f), corev1.EventTypeWarning, reason, msg) && reason == ReasonPoolExhausted {
		draw.AllocationsTotal.WithLabelValues(s.class.Name, string(f), draw.ResultPoolExhausted).Inc()
	}
	if reason != ReasonPoolExhausted {
		return waitForMetalLB, nil
	}
	// Refused for lack of room: clearFree, the next phase, looks at
	// MetalLB's books and says when to look again.
	fs.refusedSince = stale.EventFirstTime(failure)
	return phase.Next(), nil
}

// classRefusal says why the class controller refuses to render the class,
// judged by the same pure functions from the cached classes; "" when it
// does not.
func (r *Reconciler) classRefusal(ctx context.Context, class *iadv1alpha1.IPAddressClass) (string, error) {
	var classes iadv1alpha1.IPAddressClassList
	if err := r.List(ctx, &classes); err != nil {
		return "", err
	}
	return classparams.Refusal(class, classes.Items), nil
}

// Stale allocations of free addresses (docs/design.md §3): a Service
// deleted while MetalLB was starting keeps its address in MetalLB's
// allocator. When the address left the ledger meanwhile, MetalLB refuses
// the class's new placeholders while the ledger shows room; the claim and
// warm controllers then clear those allocations (stale.Clear).

// clearFree asks the stale.Clearer to look for stale allocations of the
// class's free addresses in MetalLB, which refused the claim's placeholder
// for lack of room since fs.refusedSince (observe).
func (r *Reconciler) clearFree(ctx context.Context, fs *familyScope) (phase.Result, error) {
	if fs.refusedSince.IsZero() {
		return phase.Next(), nil
	}
	s, f, ph, refusedSince := fs.scope, fs.f, fs.ph, fs.refusedSince
	book := r.shared.Draws.Of(s.class.Name)
	book.Decide.Lock()
	_, drawn, inflight, err := r.classDraws(ctx, book, s.class.Name, f, time.Now())
	book.Decide.Unlock()
	if err != nil {
		return phase.Next(), err
	}
	// A refusal is rare: the clear reads the class's whole ledger.
	var addrs iadv1alpha1.IPAddressList
	if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClass: s.class.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return phase.Next(), err
	}
	// The refused placeholder is one of the draws: room for it means the
	// ledger and the other draws leave at least one address free.
	full, _, _ := draw.ClassFull(s.class, f, draw.ViewOf(addrs.Items, s.class.Name, f).Entries, drawn+inflight-1)
	wait, err := (&stale.Clearer{Deps: r.Deps, Cleared: &r.shared.Cleared}).ClearFree(ctx, s.class, f, addrs.Items, full, refusedSince, []*corev1.Service{ph})
	if wait > 0 {
		return phase.RetryAfter(wait, "MetalLB refuses the placeholder while the ledger shows room"), err
	}
	return waitForMetalLB, err
}
