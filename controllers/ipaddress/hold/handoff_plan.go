package hold

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// The handoffs (docs/design.md §4), as the hold plans them: an attached
// address's placeholders park, go, or share the address with the
// workload, under the key the pair shares. parkPlaceholders (handoff.go)
// steps them aside to the parking pool.

// planAttached plans an attached address: nothing moves while its Service
// leaves, the hold stays in a shared attachment, and otherwise the
// placeholders park when the parking pool can take them (the parked
// handoff) or go (the gap handoff).
func (p *planning) planAttached(w *iadv1alpha1.WorkloadReference) holdPlan {
	attached := p.attached
	switch {
	case attached != nil && (attached.DeletionTimestamp != nil || marks.LetGo(p.addr, attached)):
		return p.planLeaving(w)
	case marks.SharesHold(attached, p.key):
		return p.planShared(w)
	case len(p.phs) == 0:
		return holdPlan{Held: &heldVerdict{Code: heldReleased, For: w}}
	case p.park.Open:
		return p.planParking(w)
	}
	return holdPlan{Delete: services(p.live, func(seen) bool { return true })}
}

// planParking plans the gap handoff of an address whose placeholders step
// aside to the parking pool instead of going: MetalLB moves each to a
// parking address and frees it without a pass over every Service. The
// hold counts as released once no placeholder holds the address any more.
func (p *planning) planParking(w *iadv1alpha1.WorkloadReference) holdPlan {
	plan := holdPlan{Park: services(p.live, func(s seen) bool { return !s.parked })}
	// Held is left as it is while a placeholder still holds the address:
	// it does hold it until MetalLB moves it, so Held is written once,
	// False, when the address is free for the workload.
	switch {
	case len(plan.Park) > 0:
	case slices.ContainsFunc(p.phs, func(s seen) bool { return s.holds }):
		plan.Parking = true
	default:
		plan.Held = &heldVerdict{Code: heldReleasedParked, For: w}
	}
	return plan
}

// planShared plans a shared attachment: the placeholder keeps holding the
// address beside the Service. A missing one is created once the Service
// holds the address (it then shares it at once: same key, ports apart).
func (p *planning) planShared(w *iadv1alpha1.WorkloadReference) holdPlan {
	plan := holdPlan{Key: p.key}
	switch {
	case len(p.phs) == 0 && !marks.Holds(p.attached, p.ip):
		// The Service takes the address first (a gap handoff finished by
		// a Service that became able to share on the way).
		plan.Held = &heldVerdict{Code: heldReleased, For: w}
	case len(p.phs) == 0:
		plan.Create = true
		plan.Held = &heldVerdict{Code: waitingToShareAttached, By: p.holdName(), For: w}
	case len(p.live) == 0:
		plan.Held = verdict(waitingPlaceholderGoing, nil)
	default:
		var holder *corev1.Service
		if plan.Repair, holder = p.repairsAndHolder(plan.Key); holder == nil {
			plan.Held = verdict(waitingToShareAttached, p.live[0].Service)
		} else {
			plan.Delete = p.surplus(holder)
			plan.Held = verdict(heldBeside, holder)
		}
		plan.Held.For = w
	}
	return plan
}

// planLeaving plans an address whose attached Service is being deleted or
// was let go (marks.LetGo): nothing is created or deleted, since the
// association is cleared next; only Held follows what holds the address.
func (p *planning) planLeaving(w *iadv1alpha1.WorkloadReference) holdPlan {
	if i := slices.IndexFunc(p.live, func(s seen) bool { return s.holds }); i >= 0 {
		h := verdict(heldBeside, p.live[i].Service)
		h.For = w
		return holdPlan{Held: h}
	}
	if len(p.phs) == 0 {
		return holdPlan{Held: &heldVerdict{Code: heldReleased, For: w}}
	}
	return holdPlan{}
}

// holdKey is the sharing key of the hold placeholders: the binding's when a
// workload shares or is about to share the address with them (share), or
// when one carries it already (taking a key back costs MetalLB a full pass
// over every Service, as giving it does); none otherwise, so an unshared
// claim costs MetalLB one single-Service allocation. The binding's key
// under the secret before a rotation is replaced by the new one in one
// write: stripped first, a workload attaching at once would have the hold
// written twice, and MetalLB, still on the first write, would refuse the
// workload its address. Any other key (another binding's, one written by
// hand) is taken away.
func (p *planning) holdKey(share bool) string {
	if share || slices.ContainsFunc(p.live, func(s seen) bool {
		return s.marks.KeyedExactly(p.key) || (p.before != "" && s.marks.KeyedExactly(p.before))
	}) {
		return p.key
	}
	return ""
}

// sharing reports whether a workload is about to share the unattached
// address with its hold: the Service being attached takes the shared
// handoff (sharesSoon; never while the hold can park), or a holder hands
// the address back in it.
func (p *planning) sharing() bool {
	if !p.park.Open && sharesSoon(p.addr, p.attaching) {
		return true
	}
	return slices.ContainsFunc(p.hs, func(s seen) bool { return marks.HandingBack(p.addr, p.key, s.Service, p.placeholders) })
}

// pairKey is the key the address is shared under (marks.PairKey): key, or
// the one the attached Service, or a holder handing the address back,
// already shares it under since before a rotation of the secret.
func pairKey(a *iadv1alpha1.IPAddress, key, ip string, attached *corev1.Service, holders, placeholders []corev1.Service) string {
	if attached != nil {
		return marks.PairKey(attached, key, ip)
	}
	for i := range holders {
		h := &holders[i]
		if k := marks.PairKey(h, key, ip); k != key && marks.HandingBack(a, k, h, placeholders) {
			return k
		}
	}
	return key
}

// sharesSoon reports whether svc, the Service the attach grant names, asks
// for the claim and can share the address (the Service controller's test):
// the hold then needs the key before the Service is pinned.
func sharesSoon(a *iadv1alpha1.IPAddress, svc *corev1.Service) bool {
	ref := a.Spec.ClaimRef
	if svc == nil || svc.DeletionTimestamp != nil || ref == nil || !marks.Of(svc).Asks(a) {
		return false
	}
	return marks.ServiceShareProblem(svc) == ""
}
