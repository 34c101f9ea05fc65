package binding

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// The release sequence (docs/design.md §4 "Teardown", §5), run by whichever
// controller gets there first: (1) while the ingress shows the address, the
// release pin replaces the pin (ReleaseAnnotations); (2) once it does not,
// the pin and markers go (WithdrawnAnnotations). Removing the pin alone
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

// LetGo reports whether svc was detached from the address in one write (a
// grant-only pool): still the associated Service, not being deleted, no
// longer asking for the claim, with neither pinned-by marker nor grant.
func LetGo(a *iadv1alpha1.IPAddress, svc *corev1.Service) bool {
	at := a.Status.AssociatedTo
	if svc == nil || at == nil || at.Kind != "Service" || at.Namespace != svc.Namespace || at.Name != svc.Name || svc.DeletionTimestamp != nil {
		return false
	}
	_, marked := svc.Annotations[names.AnnotationPinnedBy]
	_, granted := svc.Labels[names.LabelGrant]
	return !marked && !granted && !Asks(svc, a)
}

// Asks reports whether svc's claim annotation names the address's claim.
func Asks(svc *corev1.Service, a *iadv1alpha1.IPAddress) bool {
	ref := a.Spec.ClaimRef
	return ref != nil && ref.Name != "" && ref.Namespace == svc.Namespace && svc.Annotations[iadv1alpha1.ServiceClaimAnnotation] == ref.Name
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

// ReleaseAnnotations is step 1 of the release sequence. With release empty
// (a grant-only pool, the same patch withdrawing the grant) the pin is
// removed instead: the selector, not an impossible pin, makes MetalLB let go.
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

// WithdrawnAnnotations is step 2: in without anything the driver wrote.
// Only for a Service whose pin the driver wrote.
func WithdrawnAnnotations(in map[string]string) map[string]string {
	out := CloneAnnotations(in)
	delete(out, names.MetalLBLoadBalancerIPs)
	delete(out, names.AnnotationPinnedBy)
	WithdrawKey(out)
	return out
}

// TakeOverPool moves the Service's own pool requests out of ann (the first
// recorded in AnnotationOwnerPool) and returns them as "key: value": beside
// the pin, a pool that may not hold the address makes MetalLB refuse it.
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

// WithdrawKey removes the sharing key and its marker, if the driver wrote the key.
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
