package ipaddress

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// Stale allocations in MetalLB (docs/design.md §3): MetalLB v0.15.2 drops
// single-Service events until its first full pass succeeds, so a Service
// deleted in that window keeps its address in MetalLB's allocator, refused
// to everyone else until MetalLB restarts or processes an event for that
// name. When the rightful holder of an address holds nothing, nobody else
// does, and MetalLB's refusal names a Service that does not exist, the
// controller clears the allocation (stale.Clear).

// maxFormerHolders bounds how many former holders one pass looks at.
const maxFormerHolders = 8

// staleRecheck is how often, beyond one MetalLB full pass (passTime), an
// address whose rightful holder gets nothing is looked at again.
const staleRecheck = 10 * time.Second

// staleSettle is how long, beyond one full pass, a refusal lasts before
// the allocation is cleared: time for MetalLB to process a deletion that
// just happened.
const staleSettle = 5 * time.Second

// allocatedServices counts, from the Service informer, the Services that
// hold a load-balancer address: the size of MetalLB's full passes.
type allocatedServices struct{ n atomic.Int64 }

func (c *allocatedServices) count() int64 { return c.n.Load() }

func (c *allocatedServices) handler() toolscache.ResourceEventHandler {
	held := func(o any) int64 {
		if svc, ok := o.(*corev1.Service); ok && len(svc.Status.LoadBalancer.Ingress) > 0 {
			return 1
		}
		return 0
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.n.Add(held(o)) },
		UpdateFunc: func(old, cur any) { c.n.Add(held(cur) - held(old)) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			c.n.Add(-held(o))
		},
	}
}

// clearStale is the stale-allocation pass: once the hold has nothing left
// to create, delete or park, it clears a stale allocation that keeps the
// address from its rightful holder (rightfulHolder), and looks again when
// MetalLB has had time to answer.
func (r *Reconciler) clearStale(ctx context.Context, s *scope) (phase.Result, error) {
	if s.hold == nil || s.hold.plan.writes() {
		return phase.Next(), nil
	}
	again, err := r.clearStaleAllocations(ctx, s, s.hold.view)
	if err != nil || again == 0 {
		return phase.Next(), err
	}
	return phase.RetryAfter(again, "a stale allocation may keep the rightful holder out"), nil
}

// clearStaleAllocations clears a stale allocation that keeps the address
// from its rightful holder, and returns when to look again.
func (r *Reconciler) clearStaleAllocations(ctx context.Context, s *scope, v *holdView) (time.Duration, error) {
	a, ip, placeholders, attached := s.addr, v.ip, v.cached, rightfulHolder(v, s.key)
	blocked := blockedService(a, ip, s.key, placeholders, v.holders, attached)
	if blocked == nil {
		return 0, r.dropRetryMarks(ctx, ip, placeholders, attached)
	}
	var evs corev1.EventList
	if err := r.APIReader.List(ctx, &evs, client.InNamespace(blocked.Namespace),
		client.MatchingFields{"involvedObject.name": blocked.Name, "reason": stale.AllocationFailed}); err != nil {
		return 0, err
	}
	failure := stale.LatestFailure(evs.Items, blocked.UID)
	if failure == nil {
		return staleRecheck, nil
	}
	// Give MetalLB staleSettle from its first refusal and staleRecheck
	// from a poke, each plus one full pass: a pass under way that
	// processes the holder's deletion answers the refusal, and clearing
	// meanwhile would only queue more passes behind it.
	busy := passTime(r.allocated.count())
	wait := staleSettle + busy - time.Since(stale.EventFirstTime(failure))
	if poked, ok := marks.RetriedAt(blocked); ok {
		wait = max(wait, staleRecheck+busy-time.Since(poked))
	}
	if wait > 0 {
		return wait, nil
	}
	var sameKey []types.NamespacedName
	if !stale.NamesHolders(failure.Message) {
		var err error
		if sameKey, err = r.formerHolders(ctx, blocked, ip); err != nil {
			return 0, err
		}
	}
	for _, key := range stale.Holders(failure.Message, ip, sameKey) {
		// An Event on a tenant's Service is believed only about its own
		// namespace and the placeholder one, where only MetalLB and the
		// driver write Events.
		if blocked.Namespace != r.PlaceholderNamespace && key.Namespace != blocked.Namespace && key.Namespace != r.PlaceholderNamespace {
			continue
		}
		if err := r.clearStaleAllocation(ctx, a, ip, key); err != nil {
			return 0, err
		}
	}
	// Clearing an allocation no other Service shares does not make MetalLB
	// look at the others: the blocked Service is handed back to it.
	return staleRecheck + busy, stale.Poke(ctx, r, blocked)
}

// formerHolders are the Services besides svc that MetalLB's Events say it
// assigned ip to, in svc's namespace and the placeholder one: where only a
// port is taken, the holder has the same sharing key, so it is a former
// placeholder or Service of the address.
func (r *Reconciler) formerHolders(ctx context.Context, svc *corev1.Service, ip string) ([]types.NamespacedName, error) {
	var all []corev1.Event
	for _, ns := range slices.Compact([]string{svc.Namespace, r.PlaceholderNamespace}) {
		var evs corev1.EventList
		if err := r.APIReader.List(ctx, &evs, client.InNamespace(ns),
			client.MatchingFields{"reason": stale.ReasonIPAllocated}); err != nil {
			return nil, err
		}
		all = append(all, evs.Items...)
	}
	return stale.AssignedTo(all, ip, client.ObjectKeyFromObject(svc), maxFormerHolders), nil
}

// dropRetryMarks removes the poke's mark from the address's placeholders
// and attached Service once settled: a Service pinned to a refused second
// address keeps it, since that address's pass spaces its pokes by it.
func (r *Reconciler) dropRetryMarks(ctx context.Context, ip string, placeholders []corev1.Service, attached *corev1.Service) error {
	svcs := []*corev1.Service{attached}
	for i := range placeholders {
		svcs = append(svcs, &placeholders[i])
	}
	for _, svc := range svcs {
		if svc == nil || !settled(svc, ip) {
			continue
		}
		if marks.HasRetry(svc) {
			if err := stale.SetRetryMark(ctx, r, svc, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// clearStaleAllocation clears MetalLB's allocation for the name key
// (stale.Clear) and tells the address.
func (r *Reconciler) clearStaleAllocation(ctx context.Context, a *iadv1alpha1.IPAddress, ip string, key types.NamespacedName) error {
	cleared, err := stale.Clear(ctx, r, r.APIReader, key, a.Name)
	if err != nil || !cleared {
		return err
	}
	log.FromContext(ctx).Info("cleared a stale MetalLB allocation", "service", key, "ip", ip)
	r.Recorder.Event(a, corev1.EventTypeNormal, ReasonStaleAllocationCleared, msgStaleAllocationCleared(ip, key))
	return nil
}
