package service

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/names"
)

// ShareProblem explains why, under MetalLB's rules for sharing an IP, the
// Service cannot share the claim's addresses with their placeholders for
// the shared handoff; "" when it can. key is the claim's sharing key
// (SharingKeyOf). MetalLB (v0.15) lets Services share an address only when
// all carry the same metallb.io/allow-shared-ip key, their ports
// (protocol and number) do not overlap, and their backend keys agree
// (binding.ShapeProblem, which the IPAddress controller reads too to keep
// the hold placeholder through a shared attachment). On top of that the driver only writes the key on a
// Service that has none of its own, and only pins a Service that carries
// no pin of its own.
func ShareProblem(svc *corev1.Service, key string) string {
	if key == "" {
		return "the claim's addresses are bound to different claim references, so they have no common sharing key"
	}
	return binding.ServiceShareProblem(svc)
}

// UnkeyedHolder returns, among the Services holding one of a claim's
// addresses (holders), a placeholder that does not carry the claim's
// sharing key key; nil when there is none. The shared handoff pins the
// Service only once every placeholder holding the addresses carries the
// key: the IPAddress controller gives a hold its key only for that
// handoff (MetalLB reprocesses every Service for each key it sees first,
// so holds nobody shares stay keyless), and MetalLB refuses an address to
// a Service whose key its holder does not share, without trying again.
func UnkeyedHolder(holders []corev1.Service, key, placeholderNamespace string) *corev1.Service {
	for i := range holders {
		h := &holders[i]
		if binding.Exempt(h, placeholderNamespace) && h.Annotations[names.MetalLBAllowSharedIP] != key {
			return h
		}
	}
	return nil
}

// SharingKeyOf is the sharing key common to addrs (binding.SharingKey);
// "" when there are none or they disagree.
func SharingKeyOf(addrs []*iadv1alpha1.IPAddress) string {
	key := ""
	for i, a := range addrs {
		k := binding.SharingKey(a)
		if i > 0 && k != key {
			return ""
		}
		key = k
	}
	return key
}

// SharesOurKey reports whether the Service's metallb.io/allow-shared-ip was
// written by the driver: the shared-by marker is present.
func SharesOurKey(svc *corev1.Service) bool { return binding.SharesOurKey(svc) }

// GrantLabels is a Service's labels with the grant label of class (none
// when class is empty). The input is not modified.
func GrantLabels(in map[string]string, class string) map[string]string {
	if class == "" {
		return in
	}
	out := binding.CloneAnnotations(in)
	out[names.LabelGrant] = class
	return out
}

// UngrantedLabels is a Service's labels without the grant label. The input
// is not modified; a Service without the label keeps its map as it is.
func UngrantedLabels(in map[string]string) map[string]string {
	if _, ok := in[names.LabelGrant]; !ok {
		return in
	}
	out := binding.CloneAnnotations(in)
	delete(out, names.LabelGrant)
	return out
}

// ClassOf is the class of addrs (the class of a claim's addresses); "" when
// there are none.
func ClassOf(addrs []*iadv1alpha1.IPAddress) string {
	for _, a := range addrs {
		if a.Spec.ClassName != "" {
			return a.Spec.ClassName
		}
	}
	return ""
}

// HandedBack reports whether a Service being detached may let MetalLB take
// the address back without leaving it unheld: the address is attached to
// another workload now (it is that workload's to hold), or it is attached
// to none and held again, as both the IPAddress controller reports (Held
// True) and the Service cache shows (one of the address's placeholders
// holds its IP). holders are the Services whose ingress shows the
// address's IP. An address still attached to svc is not handed back.
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
// among holders (the Services MetalLB assigned the address to) and holds
// it: in a shared attachment, beside the Service.
func HeldBeside(a *iadv1alpha1.IPAddress, holders []corev1.Service, placeholderNamespace string) bool {
	ips := addressIPs([]*iadv1alpha1.IPAddress{a})
	for i := range holders {
		h := &holders[i]
		if binding.Exempt(h, placeholderNamespace) && h.Labels[names.LabelAddress] == a.Name && binding.Holds(h, ips...) {
			return true
		}
	}
	return false
}
