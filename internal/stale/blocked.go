package stale

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// A Service kept from the address it should hold (docs/design.md §3):
// MetalLB v0.15.2 drops single-Service events until its first full pass
// succeeds, so a Service deleted in that window keeps its address in
// MetalLB's allocator, refused to everyone else until MetalLB restarts or
// processes an event for that name. When the rightful holder of an
// address holds nothing (Blocked), nobody else does, and MetalLB's refusal
// names a Service that does not exist, the ipaddress controller has the
// allocation cleared (Unblocker.Unblock).

// maxFormerHolders bounds how many former holders one pass looks at.
const maxFormerHolders = 8

// Recheck is how often, beyond one MetalLB full pass (PassTime), an
// address whose rightful holder gets nothing is looked at again.
const Recheck = 10 * time.Second

// settle is how long, beyond one full pass, a refusal lasts before the
// allocation is cleared: time for MetalLB to process a deletion that just
// happened.
const settle = 5 * time.Second

// Allocated counts, from the Service informer, the Services that hold a
// load-balancer address: the size of MetalLB's full passes.
type Allocated struct{ n atomic.Int64 }

// Count is the Services holding a load-balancer address now.
func (c *Allocated) Count() int64 { return c.n.Load() }

// Handler keeps the count from the Service informer's events.
func (c *Allocated) Handler() toolscache.ResourceEventHandler {
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

// Unblocker clears the stale allocations that keep a Service from the
// address it should hold; its APIReader reads Events the cache does not
// hold.
type Unblocker struct {
	bootstrap.Deps
	Allocated *Allocated
}

// Unblock clears the stale allocations that keep blocked, the rightful
// holder of ip (Blocked), from it, once MetalLB has refused blocked long
// enough, telling cleared of each; it returns when to look again (0:
// blocked is not refused).
func (u *Unblocker) Unblock(ctx context.Context, blocked *corev1.Service, ip string, cleared func(types.NamespacedName) error) (time.Duration, error) {
	var evs corev1.EventList
	if err := u.APIReader.List(ctx, &evs, client.InNamespace(blocked.Namespace),
		client.MatchingFields{"involvedObject.name": blocked.Name, "reason": AllocationFailed}); err != nil {
		return 0, err
	}
	failure := LatestFailure(evs.Items, blocked.UID)
	if failure == nil {
		return Recheck, nil
	}
	// Give MetalLB settle from its first refusal and Recheck from a poke,
	// each plus one full pass: a pass under way that processes the
	// holder's deletion answers the refusal, and clearing meanwhile would
	// only queue more passes behind it.
	busy := PassTime(u.Allocated.Count())
	wait := settle + busy - time.Since(EventFirstTime(failure))
	if poked, ok := marks.RetriedAt(blocked); ok {
		wait = max(wait, Recheck+busy-time.Since(poked))
	}
	if wait > 0 {
		return wait, nil
	}
	var sameKey []types.NamespacedName
	if !NamesHolders(failure.Message) {
		var err error
		if sameKey, err = u.formerHolders(ctx, blocked, ip); err != nil {
			return 0, err
		}
	}
	for _, key := range Holders(failure.Message, ip, sameKey) {
		// An Event on a tenant's Service is believed only about its own
		// namespace and the placeholder one, where only MetalLB and the
		// driver write Events.
		if blocked.Namespace != u.PlaceholderNamespace && key.Namespace != blocked.Namespace && key.Namespace != u.PlaceholderNamespace {
			continue
		}
		if err := cleared(key); err != nil {
			return 0, err
		}
	}
	// Clearing an allocation no other Service shares does not make MetalLB
	// look at the others: the blocked Service is handed back to it.
	return Recheck + busy, Poke(ctx, u, blocked)
}

// formerHolders are the Services besides svc that MetalLB's Events say it
// assigned ip to, in svc's namespace and the placeholder one: where only a
// port is taken, the holder has the same sharing key, so it is a former
// placeholder or Service of the address.
func (u *Unblocker) formerHolders(ctx context.Context, svc *corev1.Service, ip string) ([]types.NamespacedName, error) {
	var all []corev1.Event
	for _, ns := range slices.Compact([]string{svc.Namespace, u.PlaceholderNamespace}) {
		var evs corev1.EventList
		if err := u.APIReader.List(ctx, &evs, client.InNamespace(ns),
			client.MatchingFields{"reason": ReasonIPAllocated}); err != nil {
			return nil, err
		}
		all = append(all, evs.Items...)
	}
	return AssignedTo(all, ip, client.ObjectKeyFromObject(svc), maxFormerHolders), nil
}

// DropRetryMarks removes the poke's mark from svcs (nil ones skipped) once
// settled: a Service pinned to a refused second address keeps it, since
// that address's pass spaces its pokes by it.
func DropRetryMarks(ctx context.Context, c client.Client, ip string, svcs ...*corev1.Service) error {
	for _, svc := range svcs {
		if svc == nil || !settled(svc, ip) || !marks.HasRetry(svc) {
			continue
		}
		if err := SetRetryMark(ctx, c, svc, nil); err != nil {
			return err
		}
	}
	return nil
}
