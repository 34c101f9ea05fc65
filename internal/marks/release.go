package marks

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// The release sequence (docs/design.md §4 "Teardown", §5), run by whichever
// controller gets there first: (1) while the ingress shows the address, the
// release pin replaces the pin (Marks.Release); (2) once it does not,
// the pin and markers go (Marks.Withdraw). Removing the pin alone
// would not do: MetalLB keeps an assignment still valid for its pool.

// ReleasePinValue is the pin that makes MetalLB drop a Service's addresses
// and assign nothing: the unspecified address of a family the Service does
// not have, which no pool can satisfy.
func ReleasePinValue(svc *corev1.Service) string {
	fams := ServiceFamilies(svc)
	if len(fams) == 1 && fams[0] == corev1.IPv4Protocol {
		return "::"
	}
	return "0.0.0.0"
}

// IsReleasePin reports whether a pin value is a release pin.
func IsReleasePin(v string) bool {
	ip, err := netip.ParseAddr(v)
	return err == nil && ip.IsUnspecified()
}

// Releasing reports whether the driver is letting svc go (pinned-by marker,
// and the release pin or neither pin nor grant), so MetalLB taking the
// address from it is expected.
func (m Marks) Releasing() bool {
	if m.PinnedBy == "" {
		return false
	}
	if m.Pin != "" {
		return IsReleasePin(m.Pin)
	}
	return m.Grant == ""
}

// ReleaseStarted reports whether the release of a Service's addresses has
// been written: with a release pin, the pin is that value; with the grant
// (release empty), neither the pin nor the grant label is left.
func (m Marks) ReleaseStarted(release string) bool {
	if release != "" {
		return m.Pin == release
	}
	return m.Pin == "" && m.Grant == ""
}

// LetGo reports whether svc was detached from the address in one write (a
// grant-only pool): still the associated Service, not being deleted, no
// longer asking for the claim, with neither pinned-by marker nor grant, and
// no pin written by hand that names the address: MetalLB keeps an address
// a Service pins itself, so such a Service is never let go, and waiting
// for it would wait for ever.
func LetGo(a *iadv1alpha1.IPAddress, svc *corev1.Service) bool {
	at := a.Status.AssociatedTo
	if svc == nil || at == nil || at.Kind != "Service" || at.Namespace != svc.Namespace || at.Name != svc.Name || svc.DeletionTimestamp != nil {
		return false
	}
	m := Of(svc)
	if m.PinnedBy != "" || m.Grant != "" || m.Asks(a) {
		return false
	}
	ip := PinValue([]string{a.Spec.Address})
	return ip == "" || !slices.Contains(strings.Split(m.HandPin(), ","), ip)
}

// Asks reports whether the Service asks for the address's claim (the
// Service's namespace is the claim's: a claim serves its own namespace).
func (m Marks) Asks(a *iadv1alpha1.IPAddress) bool {
	ref := a.Spec.ClaimRef
	return ref != nil && ref.Name != "" && m.Claim == ref.Name && m.namespace == ref.Namespace
}

// ServiceFamilies returns spec.ipFamilies, else the families of the cluster IPs.
func ServiceFamilies(svc *corev1.Service) []corev1.IPFamily {
	if len(svc.Spec.IPFamilies) > 0 {
		return svc.Spec.IPFamilies
	}
	var out []corev1.IPFamily
	for _, s := range svc.Spec.ClusterIPs {
		if ip, err := netip.ParseAddr(s); err == nil {
			if ip.Unmap().Is4() {
				out = append(out, corev1.IPv4Protocol)
			} else {
				out = append(out, corev1.IPv6Protocol)
			}
		}
	}
	return out
}
