package service

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

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
func SharingKeyOf(keys marks.Keys, addrs []*iadv1alpha1.IPAddress) string {
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

// HandedBack reports whether a Service being detached may let MetalLB take
// the address back without leaving it unheld: it is attached to another
// workload now, or held again, as both the IPAddress controller (Held
// True) and the cache (HeldBeside; holders show the address's IP) say.
func HandedBack(a *iadv1alpha1.IPAddress, svc *corev1.Service, holders []corev1.Service, placeholderNamespace string) bool {
	if at := a.Status.AssociatedTo; at != nil {
		return !AssociatedWith(a, svc.Namespace, svc.Name)
	}
	if !conditions.IsTrue(a.Status.Conditions, conditions.Held) {
		return false
	}
	return HeldBeside(a, holders, placeholderNamespace)
}

// HeldBeside reports whether one of the address's own placeholders is
// among holders and holds it (in a shared attachment, beside the Service).
func HeldBeside(a *iadv1alpha1.IPAddress, holders []corev1.Service, placeholderNamespace string) bool {
	ips := addressIPs([]*iadv1alpha1.IPAddress{a})
	for i := range holders {
		h := &holders[i]
		if marks.Exempt(h, placeholderNamespace) && h.Labels[names.LabelAddress] == a.Name && marks.Holds(h, ips...) {
			return true
		}
	}
	return false
}
