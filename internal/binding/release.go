package binding

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// The release sequence takes an address back from a Service whose pin the
// driver wrote, the same way whether the Service is detached (the Service
// controller) or the address is torn down (the IPAddress controller), and
// whichever of the two gets there first:
//
//  1. while the Service's load-balancer ingress still shows the address,
//     the pin becomes the release pin (ReleasePinValue) and the driver's
//     sharing key goes (ReleaseAnnotations); the pinned-by marker stays, so
//     the Service remains authorized meanwhile;
//  2. once the ingress no longer shows it, the pin and every marker go
//     (WithdrawnAnnotations).
//
// Removing the pin alone would not do: MetalLB keeps an existing
// assignment that is still valid for its pool, so the Service would keep
// an address that left the ledger.
//
// A detach of every address a Service holds, where the class pool admits
// only Services carrying the grant label, takes one write instead (LetGo):
// the pin, the key, the markers and the grant label go together while the
// address's status.associatedTo still names the Service, which keeps it
// authorized until MetalLB has taken the address back; the association is
// cleared after that. MetalLB reads the Service once, not twice, and no
// second write of the Service races the full pass its release starts.

// ReleasePinValue is the pin the driver writes on a Service to make MetalLB
// take its addresses back. MetalLB keeps an address on a Service even after
// its pin is removed; a pin MetalLB cannot satisfy makes it drop the
// current address at once and assign nothing. The value is the unspecified
// address of a family the Service does not have (for a dual-stack Service,
// a single address), which no pool can ever satisfy.
func ReleasePinValue(svc *corev1.Service) string {
	fams := ServiceFamilies(svc)
	if len(fams) == 1 && fams[0] == corev1.IPv4Protocol {
		return "::"
	}
	return "0.0.0.0"
}

// IsReleasePin reports whether a pin value is a release pin (an unspecified
// address), which never names a real address.
func IsReleasePin(v string) bool {
	ip, err := netip.ParseAddr(v)
	return err == nil && ip.IsUnspecified()
}

// Releasing reports whether the driver is letting svc go: it carries the
// driver's pinned-by marker and either the release pin, or neither a pin
// nor the grant label (the release by grant withdrawal, ReleaseAnnotations
// with release empty). MetalLB taking an address from such a Service is
// what the driver asked for.
func Releasing(svc *corev1.Service) bool {
	if _, ours := svc.Annotations[names.AnnotationPinnedBy]; !ours {
		return false
	}
	if pin, pinned := svc.Annotations[names.MetalLBLoadBalancerIPs]; pinned {
		return IsReleasePin(pin)
	}
	_, granted := svc.Labels[names.LabelGrant]
	return !granted
}

// LetGo reports whether svc was detached from the address in one write
// (see the top of this file): it is still the Service the address's
// status.associatedTo names, not being deleted, no longer asks for the
// address's claim, and carries neither the driver's pinned-by marker nor a
// grant label. An associated Service that still asks for the claim and is
// not pinned yet is one the gap handoff is attaching; one that does not
// ask for it any more, stripped of both, is one the Service controller
// let go: MetalLB takes the address back from it, and the association is
// cleared once it has.
func LetGo(a *iadv1alpha1.IPAddress, svc *corev1.Service) bool {
	at := a.Status.AssociatedTo
	if svc == nil || at == nil || at.Kind != "Service" || at.Namespace != svc.Namespace || at.Name != svc.Name || svc.DeletionTimestamp != nil {
		return false
	}
	_, marked := svc.Annotations[names.AnnotationPinnedBy]
	_, granted := svc.Labels[names.LabelGrant]
	return !marked && !granted && !Asks(svc, a)
}

// Asks reports whether svc's claim annotation names the claim the address
// is bound to (a Service names a claim of its own namespace).
func Asks(svc *corev1.Service, a *iadv1alpha1.IPAddress) bool {
	ref := a.Spec.ClaimRef
	return ref != nil && ref.Name != "" && ref.Namespace == svc.Namespace && svc.Annotations[iadv1alpha1.ServiceClaimAnnotation] == ref.Name
}

// ServiceFamilies returns the Service's IP families: spec.ipFamilies, else
// the families of its cluster IPs.
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

// ReleaseAnnotations is step 1 of the release sequence: the pin becomes
// the release pin and the sharing key the driver wrote goes. The pinned-by
// marker stays. The input is not modified.
//
// With release empty (the class pool requires the grant label, which the
// same patch withdraws) the pin is removed instead: the pool's selector,
// not an impossible pin, is what makes MetalLB let go.
func ReleaseAnnotations(in map[string]string, release string) map[string]string {
	out := CloneAnnotations(in)
	if release == "" {
		delete(out, names.MetalLBLoadBalancerIPs)
	} else {
		out[names.MetalLBLoadBalancerIPs] = release
	}
	WithdrawKey(out)
	return out
}

// WithdrawnAnnotations is step 2 of the release sequence: a Service's
// annotations without anything the driver wrote (the pin and its marker,
// the sharing key and its marker if the driver wrote the key). Call it
// only on a Service whose pin the driver wrote. The input is not modified.
func WithdrawnAnnotations(in map[string]string) map[string]string {
	out := CloneAnnotations(in)
	delete(out, names.MetalLBLoadBalancerIPs)
	delete(out, names.AnnotationPinnedBy)
	WithdrawKey(out)
	return out
}

// TakeOverPool removes the Service's own MetalLB pool requests (either
// spelling) from ann, which the driver's pin is about to replace, records
// the first one removed in AnnotationOwnerPool (unless a record is there
// already), and returns what it removed ("key: value", "" for nothing).
// A pool request next to the pin names a pool that may not hold the
// address: MetalLB then refuses the pin as incompatible with the pool, and
// the pin alone already makes MetalLB allocate from the pool holding it.
func TakeOverPool(ann map[string]string) string {
	var removed []string
	for _, k := range []string{names.MetalLBAddressPool, names.MetalLBLegacyAddressPool} {
		v, ok := ann[k]
		if !ok {
			continue
		}
		if _, recorded := ann[names.AnnotationOwnerPool]; !recorded {
			ann[names.AnnotationOwnerPool] = v
		}
		delete(ann, k)
		removed = append(removed, k+": "+v)
	}
	return strings.Join(removed, ", ")
}

// WithdrawKey removes the sharing key and its marker, if the marker shows
// the driver wrote the key.
func WithdrawKey(ann map[string]string) {
	if _, ours := ann[names.AnnotationSharedBy]; ours {
		delete(ann, names.MetalLBAllowSharedIP)
		delete(ann, names.AnnotationSharedBy)
	}
}

// CloneAnnotations copies an annotation map (nil gives an empty map).
func CloneAnnotations(in map[string]string) map[string]string {
	out := make(map[string]string, len(in)+4)
	for k, v := range in {
		out[k] = v
	}
	return out
}
