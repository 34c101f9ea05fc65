package claim

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// isOrphan decides whether an allocation placeholder is an orphan: its
// claim is gone (nil) or replaced (another uid), and it backs no IPAddress
// (no owner reference, and addr, the one its label names, is not bound to
// its claim).
func isOrphan(ph *corev1.Service, claim *iadv1alpha1.IPAddressClaim, addr *iadv1alpha1.IPAddress) bool {
	if ph.Labels[names.LabelPlaceholder] != names.PlaceholderAllocation {
		return false
	}
	uid := ph.Labels[names.LabelClaimUID]
	if claim != nil && string(claim.UID) == uid {
		return false
	}
	if ownedByAddress(ph, "") {
		return false
	}
	if label := ph.Labels[names.LabelAddress]; label != "" && addr != nil && addr.Name == label && addr.Spec.ClaimRef != nil {
		r := addr.Spec.ClaimRef
		if r.UID == uid {
			return false
		}
		if r.UID == "" && r.Namespace == ph.Annotations[names.AnnotationClaimNamespace] && r.Name == ph.Annotations[names.AnnotationClaimName] {
			return false
		}
	}
	return true
}
