package soak

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// The invariants as pure functions of what the API shows, so each can be
// tested on hand-made states. They are written from the driver's promise,
// not from its code: the driver's own helpers are not used to judge it.

// IngressIPs returns the IPs a Service holds, as MetalLB reports them.
func IngressIPs(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		}
	}
	return out
}

// IsPlaceholderOf reports whether s is a placeholder of the address: in the
// placeholder namespace (a label alone can be forged anywhere else), marked
// as a placeholder, naming the address.
func IsPlaceholderOf(s *corev1.Service, a *iadv1alpha1.IPAddress, placeholderNS string) bool {
	return s.Namespace == placeholderNS && s.Labels[marks.LabelPlaceholder] != "" && s.Labels[marks.LabelAddress] == a.Name
}

// AttachedTo reports whether the address is attached to s, or s is in the
// middle of a handoff of it: in the claim's namespace, carrying the driver's
// pinned-by marker naming the address's claim.
func AttachedTo(a *iadv1alpha1.IPAddress, s *corev1.Service) bool {
	if at := a.Status.AssociatedTo; at != nil && at.Kind == "Service" && at.Namespace == s.Namespace && at.Name == s.Name {
		return true
	}
	ref := a.Spec.ClaimRef
	return ref != nil && ref.Name != "" && ref.Namespace == s.Namespace && s.Annotations[marks.KeyPinnedBy] == ref.Name
}

// SharedAttachment reports whether the address is attached to s in a
// shared attachment: s is the Service the address is attached to, and it
// carries the driver's sharing key (the shared-by marker). The address's
// hold placeholder then keeps holding the IP beside s for the whole
// attachment.
func SharedAttachment(a *iadv1alpha1.IPAddress, s *corev1.Service) bool {
	at := a.Status.AssociatedTo
	if at == nil || at.Kind != "Service" || at.Namespace != s.Namespace || at.Name != s.Name {
		return false
	}
	_, shared := s.Annotations[marks.KeySharedBy]
	return shared
}

// DoubleHoldAllowed decides whether several Services may hold one IP at
// once: only while its address is in phase Conflict, or during a shared
// handoff or a shared attachment, when the holders are exactly one
// placeholder of the address and one Service the address is attached (or
// being handed) to. a is the address whose IP it is, nil when no address
// has it.
func DoubleHoldAllowed(a *iadv1alpha1.IPAddress, holders []*corev1.Service, placeholderNS string) bool {
	if len(holders) < 2 {
		return true
	}
	if a == nil {
		return false
	}
	if a.Status.Phase == iadv1alpha1.AddressConflict {
		return true
	}
	if len(holders) != 2 {
		return false
	}
	var placeholders, workloads int
	for _, s := range holders {
		switch {
		case IsPlaceholderOf(s, a, placeholderNS):
			placeholders++
		case AttachedTo(a, s):
			workloads++
		}
	}
	return placeholders == 1 && workloads == 1
}

// ClaimLoss compares two states of one claim and returns the addresses it
// lost, and whether it left phase Bound, other than by being deleted.
// Either is allowed only when the address went through phase Lost.
func ClaimLoss(old, cur *iadv1alpha1.IPAddressClaim) (lost []string, leftBound bool) {
	if old.Status.Phase != iadv1alpha1.ClaimBound || cur.DeletionTimestamp != nil || old.UID != cur.UID {
		return nil, false
	}
	have := map[string]bool{}
	for _, a := range cur.Status.Addresses {
		have[a.Name] = true
	}
	for _, a := range old.Status.Addresses {
		if !have[a.Name] {
			lost = append(lost, a.Name)
		}
	}
	return lost, cur.Status.Phase != iadv1alpha1.ClaimBound
}

// ReleasePinned reports whether a Service carries a release pin: an
// unspecified address in metallb.io/loadBalancerIPs, which only the driver
// writes, and only for the moment of a detach.
func ReleasePinned(s *corev1.Service) bool {
	for _, ip := range names.SplitIPs(s.Annotations[marks.KeyPin]) {
		if ip == "0.0.0.0" || ip == "::" {
			return true
		}
	}
	return false
}
