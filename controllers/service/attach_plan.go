package service

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
)

// Handoff modes, the values of the "mode" label of metallb_iad_handoffs_total.
const (
	// ModeShared: the workload and the placeholder share the address (one
	// MetalLB sharing key), so it is never unheld.
	ModeShared = "shared"
	// ModeGap: the address is unheld for a moment between the two.
	ModeGap = "gap"
	// ModeParked: a gap handoff whose placeholder steps aside to the
	// parking pool instead of going, so that MetalLB makes no pass over
	// every Service; it comes back to the address on detach.
	ModeParked = "parked"
)

// AttachMode chooses the handoff that attaches a Service (problem:
// ShareProblem's answer): parked whenever the parking pool can take a
// placeholder of every family of the claim (parking), as neither it nor
// the Service then costs MetalLB a full pass; else shared when the Service
// can share. A gap handoff already under way (released: a hold was
// released for the Service) is finished as one; why says why a gap
// handoff was not shared.
func AttachMode(problem string, released, holdsAll, parking bool) (mode, why string) {
	switch {
	case parking:
		return ModeParked, ""
	case problem != "":
		return ModeGap, problem
	case released && !holdsAll:
		return ModeGap, "the placeholder had already let go of the address when the Service became able to share it"
	}
	return ModeShared, ""
}

// ShareProblem explains why the Service cannot share the claim's
// addresses (sharing key key, SharingKeyOf) with their placeholders under
// MetalLB's sharing rules (marks.ServiceShareProblem); "" when it can.
func ShareProblem(svc *corev1.Service, key string) string {
	if key == "" {
		return "the claim's addresses are bound to different claim references, so they have no common sharing key"
	}
	return marks.ServiceShareProblem(svc)
}

// UnkeyedHolder returns, among holders, a placeholder that does not carry
// the sharing key key (nil if none). The shared handoff pins only once
// there is none: MetalLB refuses, and never retries, an address to a
// Service whose key its holder does not share.
func UnkeyedHolder(holders []corev1.Service, key, placeholderNamespace string) *corev1.Service {
	for i := range holders {
		h := &holders[i]
		if marks.Exempt(h, placeholderNamespace) && marks.Of(h).Sharing != key {
			return h
		}
	}
	return nil
}

// SharingKeyOf is the sharing key common to addrs; "" when none or they disagree.
func SharingKeyOf(keys sharingkey.Keys, addrs []*iadv1alpha1.IPAddress) string {
	key := ""
	for i, a := range addrs {
		k := keys.Of(a)
		if i > 0 && k != key {
			return ""
		}
		key = k
	}
	return key
}

// ClassOf is the class of a claim's addresses; "" when there are none.
func ClassOf(addrs []*iadv1alpha1.IPAddress) string {
	for _, a := range addrs {
		if a.Spec.ClassName != "" {
			return a.Spec.ClassName
		}
	}
	return ""
}

// ParkedAway reports whether the address with the canonical ip is free
// for svc in a parked handoff, as a cache shows it: every placeholder of
// the address (placeholders, at least one) asks for the parking pool and
// MetalLB moved it there (it shows another address, not ip), and no
// Service but svc shows ip. Pinning earlier would make MetalLB refuse svc
// for an address in use, and MetalLB does not retry.
func ParkedAway(ip, pool string, placeholders, holders []corev1.Service, svc *corev1.Service) bool {
	if len(placeholders) == 0 || !FreeFor(ip, pool, placeholders, holders, svc) {
		return false
	}
	for i := range placeholders {
		ph := &placeholders[i]
		if !marks.Of(ph).Parked(pool) || len(marks.IngressIPs(ph)) == 0 {
			return false
		}
	}
	return true
}

// FreeFor reports whether a cache shows nothing about to take the address
// with the canonical ip from svc: no Service but svc among holders (those
// showing ip), no placeholder of the address showing it, and every
// placeholder of the address (placeholders) not being deleted asks for
// the parking pool. A placeholder pinned back to ip is about to take it,
// whatever the Held condition says: Held False written for an earlier
// attachment may not be withdrawn yet.
func FreeFor(ip, pool string, placeholders, holders []corev1.Service, svc *corev1.Service) bool {
	for i := range placeholders {
		ph := &placeholders[i]
		if ph.DeletionTimestamp == nil && !marks.Of(ph).Parked(pool) || marks.Holds(ph, ip) {
			return false
		}
	}
	for i := range holders {
		if h := &holders[i]; h.Namespace != svc.Namespace || h.Name != svc.Name {
			return false
		}
	}
	return true
}

// Released reports whether the IPAddress controller has let go of the
// address's hold for a workload (Held False, ReleasedForWorkload).
func Released(a *iadv1alpha1.IPAddress) bool {
	c := meta.FindStatusCondition(a.Status.Conditions, conditions.Held)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == conditions.ReasonReleasedForWorkload
}

// AssociatedWith reports whether the address's status.associatedTo names
// the Service namespace/name: the attach's record, written before the pin
// in a gap or parked handoff and after it in a shared one.
func AssociatedWith(a *iadv1alpha1.IPAddress, namespace, name string) bool {
	at := a.Status.AssociatedTo
	return at != nil && at.Kind == "Service" && at.Namespace == namespace && at.Name == name
}
