// Package binding decides whether a Service may hold a ledger address and
// which sharing key its holders carry. The Service and IPAddress controllers
// must agree exactly, or an address flips between Conflict and recovery.
package binding

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// Authorizes reports whether the address's binding authorizes svc: it is
// the workload in status.associatedTo, or carries the pinned-by marker of
// the claim in the claim's namespace, which covers both ends of a handoff
// while associatedTo is not (or no longer) written.
func Authorizes(a *iadv1alpha1.IPAddress, svc *corev1.Service) bool {
	if at := a.Status.AssociatedTo; at != nil && at.Kind == "Service" && at.Namespace == svc.Namespace && at.Name == svc.Name {
		return true
	}
	ref := a.Spec.ClaimRef
	if ref == nil || ref.Name == "" || ref.Namespace != svc.Namespace {
		return false
	}
	return svc.Annotations[names.AnnotationPinnedBy] == ref.Name
}

// SharingKey is the metallb.io/allow-shared-ip value every holder of the
// address carries. It derives from the claim, so both addresses of a Dual
// claim share one key, or from the address name when unbound.
func SharingKey(a *iadv1alpha1.IPAddress) string {
	if ref := a.Spec.ClaimRef; ref != nil && ref.Name != "" {
		return names.ClaimSharingKey(ref.Namespace, ref.Name, types.UID(ref.UID))
	}
	return names.AddressSharingKey(a.Name)
}

// Served reports whether the driver serves an address: its class (nil when
// gone) names this driver, or the class is gone and the address keeps the
// finalizer. Deleting a class revokes no binding.
func Served(a *iadv1alpha1.IPAddress, class *iadv1alpha1.IPAddressClass) bool {
	if class != nil {
		return class.Spec.Provisioner == names.Provisioner
	}
	return slices.Contains(a.Finalizers, names.Finalizer)
}
