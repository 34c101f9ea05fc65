package claim

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// Stale allocations of free addresses (docs/design.md §3): a Service
// deleted while MetalLB was starting keeps its address in MetalLB's
// allocator. When the address left the ledger meanwhile, MetalLB refuses
// the class's new placeholders while the ledger shows room; the claim and
// warm controllers then clear those allocations (stale.Clear).

// clearFree asks the stale.Clearer to look for stale allocations of the
// class's free addresses in MetalLB, which refused the claim's placeholder
// for lack of room since refusedSince.
func (r *Reconciler) clearFree(ctx context.Context, s *scope, f iadv1alpha1.IPFamily, refusedSince time.Time, ph *corev1.Service) (phase.Result, error) {
	book := r.draws.Of(s.class.Name)
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
	wait, err := (&stale.Clearer{Deps: r.Deps, Cleared: &r.cleared}).ClearFree(ctx, s.class, f, addrs.Items, full, refusedSince, []*corev1.Service{ph})
	if wait > 0 {
		return phase.RetryAfter(wait, "MetalLB refuses the placeholder while the ledger shows room"), err
	}
	return waitForMetalLB, err
}
