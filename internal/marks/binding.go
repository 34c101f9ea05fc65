package marks

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// Authorizes reports whether the address's binding authorizes svc: it is
// the workload in status.associatedTo, or carries the pinned-by marker of
// the claim in the claim's namespace, which covers both ends of a handoff
// while associatedTo is not (or no longer) written. The Service and
// IPAddress controllers must agree exactly, or an address flips between
// Conflict and recovery.
func Authorizes(a *iadv1alpha1.IPAddress, svc *corev1.Service) bool {
	if at := a.Status.AssociatedTo; at != nil && at.Kind == "Service" && at.Namespace == svc.Namespace && at.Name == svc.Name {
		return true
	}
	ref := a.Spec.ClaimRef
	if ref == nil || ref.Name == "" || ref.Namespace != svc.Namespace {
		return false
	}
	return Of(svc).PinnedBy == ref.Name
}

// Served reports whether the driver serves an address: its class (nil when
// gone) names this driver, or the class is gone and the address keeps the
// finalizer. Deleting a class revokes no binding.
func Served(a *iadv1alpha1.IPAddress, class *iadv1alpha1.IPAddressClass) bool {
	if class != nil {
		return class.Spec.Provisioner == names.Provisioner
	}
	return slices.Contains(a.Finalizers, Finalizer)
}
