package ipaddress

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// Stale allocations in MetalLB.
//
// MetalLB v0.15.2 drops every single-Service event that arrives before its
// first full pass over the Services has succeeded
// (internal/k8s/controllers/service_controller.go:70, initialLoadPerformed is
// set only at service_controller_reload.go:116), and that first pass is
// retried as long as any Service in it changes its allocation key or fails
// its status write. A Service deleted in that window keeps its address in
// MetalLB's allocator: no API object shows the assignment, yet MetalLB
// refuses the address to everyone else ("can't change sharing key for ...,
// address also in use by <the deleted Service>" or "port TCP/9 is already in
// use on ..."), until MetalLB restarts. Nothing the driver writes on its own
// Services changes that.
//
// MetalLB forgets the assignment as soon as it processes any event for the
// deleted Service's name: a Service of that name that is not a
// LoadBalancer, or its absence, clears it (controller/service.go:54,
// controller/main.go:55). So when a Service that should hold an address (the
// address's own placeholder while unattached, the attached Service pinned to
// it) holds nothing, nobody else holds the address (a Service handing it
// back in the shared handoff, which waits for the hold, does not count),
// and MetalLB's latest
// AllocationFailed Event on it names a Service that does not exist, the
// controller creates a headless Service of that name and deletes it again
// (Event StaleAllocationCleared on the address). MetalLB then reprocesses
// every Service and gives the address to its rightful holder.

// ReasonStaleAllocationCleared (Normal, on the IPAddress): MetalLB still
// booked the address for a Service that no longer exists; a Service of that
// name was created and deleted so MetalLB lets go of it.
const ReasonStaleAllocationCleared = "StaleAllocationCleared"

// inUseBy precedes, in MetalLB's message, the Services that hold an
// address with another sharing key.
const inUseBy = "address also in use by "

// maxFormerHolders bounds how many former holders one pass looks at.
const maxFormerHolders = 8

// metallbAllocationFailed is the reason of the Warning Event MetalLB
// records on a Service it could not give an address.
const metallbAllocationFailed = "AllocationFailed"

// staleRecheck is how often an address whose rightful holder gets nothing
// from MetalLB is looked at again, to find a stale allocation that blocks it,
// beyond the time of one MetalLB full pass (passTime).
const staleRecheck = 10 * time.Second

// staleSettle is how long after MetalLB first refused a Service an address,
// naming a Service that does not exist, the controller starts clearing
// that allocation: time for MetalLB to process a deletion that just
// happened (it then reprocesses every Service and the refused one gets the
// address), beyond the time of one MetalLB full pass (passTime).
const staleSettle = 5 * time.Second

// metallbStatusWritesPerSecond is the MetalLB controller's API client
// limit (v0.15.2: 20 requests per second). On an API server that defaults
// ipMode into a Service's load-balancer status, MetalLB writes the status of
// every allocated Service again in each full pass, so a pass takes about the
// number of allocated Services divided by this.
const metallbStatusWritesPerSecond = 20

// passTime is how long a MetalLB full pass takes with allocated Services
// holding an address (see metallbStatusWritesPerSecond).
func passTime(allocated int64) time.Duration {
	return time.Duration(allocated) * time.Second / metallbStatusWritesPerSecond
}

// allocatedServices counts the Services that hold a load-balancer address
// (an ingress IP), kept up to date from the controller's Service informer:
// the size of MetalLB's full passes, without listing every Service.
type allocatedServices struct{ n atomic.Int64 }

func (c *allocatedServices) count() int64 { return c.n.Load() }

// handler returns the informer event handler that keeps the count.
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

// blockedService returns the Service that should hold the address in
// MetalLB's books and holds nothing, while no other Service holds the
// address: the address's own live placeholder when it is not attached, or
// the attached Service when it is pinned to ip and no placeholder is left.
// In a shared attachment both should hold it, and neither counts as
// someone else: the attached Service is blocked when it holds nothing, else
// the hold placeholder when it holds nothing (a hold re-armed beside the
// Service after a MetalLB restart can meet the allocation of the deleted
// placeholder it replaces, which has the same key and port).
// It returns nil when the address is held or nobody is waiting for it.
// placeholders are the address's own, holders every Service MetalLB assigned
// ip to, attached the Service named by status.associatedTo (nil if none).
//
// A Service the driver is detaching in the shared handoff does not count as
// holding an unattached address: it keeps the address, with the address's
// sharing key, only until the re-armed hold shares it, so a stale
// allocation that keeps the hold out would keep both waiting for good.
func blockedService(a *iadv1alpha1.IPAddress, ip string, placeholders, holders []corev1.Service, attached *corev1.Service) *corev1.Service {
	// attached is the Service the address is attached to or, while it is
	// attached to none, the one a shared handoff is attaching it to.
	shared := binding.SharesHold(a, attached)
	for i := range holders {
		h := &holders[i]
		if h.DeletionTimestamp != nil || handingBack(a, h, placeholders) ||
			(shared && (isOneOf(h, placeholders) || (h.Namespace == attached.Namespace && h.Name == attached.Name))) {
			continue
		}
		return nil
	}
	if a.Status.Phase == iadv1alpha1.AddressLost || a.DeletionTimestamp != nil {
		return nil
	}
	if a.Status.AssociatedTo == nil && !shared {
		for i := range placeholders {
			ph := &placeholders[i]
			if ph.DeletionTimestamp == nil && pinnedExactly(ph, ip) {
				return ph
			}
		}
		return nil
	}
	if (len(placeholders) > 0 && !shared) || attached == nil || attached.DeletionTimestamp != nil {
		return nil
	}
	for _, pin := range names.SplitIPs(attached.Annotations[names.MetalLBLoadBalancerIPs]) {
		if pin == ip && !isOneOf(attached, holders) {
			return attached
		}
	}
	if shared {
		for i := range placeholders {
			ph := &placeholders[i]
			if ph.DeletionTimestamp == nil && pinnedExactly(ph, ip) && !isOneOf(ph, holders) {
				return ph
			}
		}
	}
	return nil
}

// isOneOf reports whether svc is one of svcs, by namespace and name.
func isOneOf(svc *corev1.Service, svcs []corev1.Service) bool {
	for i := range svcs {
		if svcs[i].Namespace == svc.Namespace && svcs[i].Name == svc.Name {
			return true
		}
	}
	return false
}

// handingBack reports whether svc, which holds the unattached address,
// is a Service handing it back in the shared handoff: not one of the
// address's placeholders, carrying exactly the address's sharing key, and
// authorized by the address's binding (the driver's pin for its claim).
func handingBack(a *iadv1alpha1.IPAddress, svc *corev1.Service, placeholders []corev1.Service) bool {
	if a.Status.AssociatedTo != nil {
		return false
	}
	for i := range placeholders {
		if placeholders[i].Namespace == svc.Namespace && placeholders[i].Name == svc.Name {
			return false
		}
	}
	return keyedExactly(svc, binding.SharingKey(a)) && binding.Authorizes(a, svc)
}

// staleHolders reads, from the message of MetalLB's AllocationFailed Event
// on a Service that wanted ip, the Services MetalLB says hold it: those it
// names ("address also in use by ns/a,ns/b"), or, when it only says that
// the placeholder port is taken on ip (the holder carries the same sharing
// key, so it belongs to the same binding), the candidates the caller knows
// for that case (the claim's allocation placeholder).
func staleHolders(msg, ip string, samePortCandidates []types.NamespacedName) []types.NamespacedName {
	if i := strings.LastIndex(msg, inUseBy); i >= 0 {
		var out []types.NamespacedName
		for _, s := range strings.Split(msg[i+len(inUseBy):], ",") {
			ns, name, ok := strings.Cut(strings.TrimSpace(s), "/")
			if ok && ns != "" && name != "" {
				out = append(out, types.NamespacedName{Namespace: ns, Name: name})
			}
		}
		return out
	}
	if strings.Contains(msg, "is already in use on \""+ip+"\"") {
		return samePortCandidates
	}
	return nil
}

// latestAllocationFailure is the most recent of MetalLB's AllocationFailed
// Events about the Service with uid, nil when there is none.
func latestAllocationFailure(evs []corev1.Event, uid types.UID) *corev1.Event {
	var latest *corev1.Event
	for i := range evs {
		e := &evs[i]
		if e.Reason != metallbAllocationFailed || e.InvolvedObject.UID != uid {
			continue
		}
		if latest == nil || stale.EventTime(e).After(stale.EventTime(latest)) {
			latest = e
		}
	}
	return latest
}

// clearStaleAllocations looks for a stale allocation in MetalLB that keeps
// the address from its rightful holder, and clears it (see above). It
// returns when to look again: soon while the holder is still blocked.
func (r *Reconciler) clearStaleAllocations(ctx context.Context, s *scope, placeholders []corev1.Service, attached *corev1.Service) (time.Duration, error) {
	a, ip := s.addr, s.ip.String()
	holders, err := r.holders(ctx, s)
	if err != nil {
		return 0, err
	}
	blocked := blockedService(a, ip, placeholders, holders, attached)
	if blocked == nil {
		return 0, r.dropRetryMarks(ctx, ip, placeholders, attached)
	}
	var evs corev1.EventList
	if err := r.APIReader.List(ctx, &evs, client.InNamespace(blocked.Namespace),
		client.MatchingFields{"involvedObject.name": blocked.Name, "reason": metallbAllocationFailed}); err != nil {
		return 0, err
	}
	failure := latestAllocationFailure(evs.Items, blocked.UID)
	if failure == nil {
		return staleRecheck, nil
	}
	// A holder deleted a moment ago may not be processed by MetalLB yet:
	// give MetalLB staleSettle from its first refusal; and once the
	// Service was poked, give MetalLB staleRecheck to answer. Both grow by
	// one full pass of MetalLB's: a refusal met while it still works
	// through the pass that processes the holder's deletion is answered by
	// that pass, and clearing or poking meanwhile would only queue more
	// passes behind it.
	busy := passTime(r.allocated.count())
	wait := staleSettle + busy - time.Since(stale.EventFirstTime(failure))
	if poked, err := time.Parse(time.RFC3339Nano, blocked.Annotations[names.AnnotationMetalLBRetry]); err == nil {
		wait = max(wait, staleRecheck+busy-time.Since(poked))
	}
	if wait > 0 {
		return wait, nil
	}
	var sameKey []types.NamespacedName
	if !strings.Contains(failure.Message, inUseBy) {
		if sameKey, err = r.formerHolders(ctx, blocked, ip); err != nil {
			return 0, err
		}
	}
	for _, key := range staleHolders(failure.Message, ip, sameKey) {
		// Anyone who can write a Service can write Events in its
		// namespace, so an Event on a tenant's Service is believed only
		// about that namespace and the driver's own; only MetalLB and the
		// driver write Events in the placeholder namespace.
		if blocked.Namespace != r.PlaceholderNamespace && key.Namespace != blocked.Namespace && key.Namespace != r.PlaceholderNamespace {
			continue
		}
		if err := r.clearStaleAllocation(ctx, a, ip, key); err != nil {
			return 0, err
		}
	}
	return staleRecheck + busy, r.poke(ctx, blocked)
}

// formerHolders are the Services MetalLB assigned ip to (its IPAllocated
// Events say so), besides svc, in the placeholder namespace and in svc's
// own: where MetalLB refuses svc the address only because a port is
// taken, the holder carries the same sharing key, so it is one of the
// address's former placeholders, or a Service of the claim's namespace
// the address was attached to before (a shared attachment on the same
// port).
func (r *Reconciler) formerHolders(ctx context.Context, svc *corev1.Service, ip string) ([]types.NamespacedName, error) {
	var all []corev1.Event
	for _, ns := range slices.Compact([]string{svc.Namespace, r.PlaceholderNamespace}) {
		var evs corev1.EventList
		if err := r.APIReader.List(ctx, &evs, client.InNamespace(ns),
			client.MatchingFields{"reason": names.MetalLBIPAllocated}); err != nil {
			return nil, err
		}
		all = append(all, evs.Items...)
	}
	return assignedTo(all, ip, client.ObjectKeyFromObject(svc), maxFormerHolders), nil
}

// assignedTo lists, at most limit, the Services other than self that
// MetalLB's IPAllocated Events say it assigned ip to.
func assignedTo(evs []corev1.Event, ip string, self types.NamespacedName, limit int) []types.NamespacedName {
	seen := map[types.NamespacedName]bool{self: true}
	var out []types.NamespacedName
	for i := range evs {
		e := &evs[i]
		key := types.NamespacedName{Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name}
		if e.Reason != names.MetalLBIPAllocated || seen[key] || !strings.Contains(e.Message, `"`+ip+`"`) {
			continue
		}
		seen[key] = true
		out = append(out, key)
		if len(out) == limit {
			break
		}
	}
	return out
}

// poke makes MetalLB process a Service once more, by writing the time into
// an annotation: MetalLB does not retry a Service it could not give an
// address, and clearing a stale allocation that no other Service shares
// does not make it look at the others again. The time also spaces the
// pokes (staleRecheck).
func (r *Reconciler) poke(ctx context.Context, svc *corev1.Service) error {
	return stale.Poke(ctx, r, svc)
}

// dropRetryMarks removes the poke's annotation from the address's
// placeholders and attached Service once they hold the address and every
// other address their pin asks for (settled). A Service pinned to two
// addresses, one held and one refused, keeps its mark: the refused
// address's controller spaces its pokes by it, and would poke at once
// if this one dropped it.
func (r *Reconciler) dropRetryMarks(ctx context.Context, ip string, placeholders []corev1.Service, attached *corev1.Service) error {
	svcs := []*corev1.Service{attached}
	for i := range placeholders {
		svcs = append(svcs, &placeholders[i])
	}
	for _, svc := range svcs {
		if svc == nil || !settled(svc, ip) {
			continue
		}
		if _, ok := svc.Annotations[names.AnnotationMetalLBRetry]; ok {
			if err := r.setRetryMark(ctx, svc, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// settled reports whether the Service holds ip and every address its
// MetalLB pin asks for.
func settled(svc *corev1.Service, ip string) bool {
	return binding.HoldsAll(svc, append(names.SplitIPs(svc.Annotations[names.MetalLBLoadBalancerIPs]), ip)...)
}

// setRetryMark sets (or, with nil, removes) the poke's annotation, in a
// merge patch of that one key.
func (r *Reconciler) setRetryMark(ctx context.Context, svc *corev1.Service, v any) error {
	return stale.SetRetryMark(ctx, r, svc, v)
}

// clearStaleAllocation makes MetalLB process the name key once more, if no
// Service of that name exists: a headless Service of that name is created
// and deleted at once (only the one created here, by uid).
func (r *Reconciler) clearStaleAllocation(ctx context.Context, a *iadv1alpha1.IPAddress, ip string, key types.NamespacedName) error {
	cleared, err := stale.Clear(ctx, r, r.APIReader, key, a.Name)
	if err != nil || !cleared {
		return err
	}
	log.FromContext(ctx).Info("cleared a stale MetalLB allocation", "service", key, "ip", ip)
	r.Recorder.Event(a, corev1.EventTypeNormal, ReasonStaleAllocationCleared, msgStaleAllocationCleared(ip, key))
	return nil
}

func msgStaleAllocationCleared(ip string, key types.NamespacedName) string {
	return fmt.Sprintf("MetalLB still booked %s for Service %s, which no longer exists (MetalLB missed its deletion while it was starting); "+
		"a Service of that name was created and deleted so that MetalLB lets go of the address", ip, key)
}
