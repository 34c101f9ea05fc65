// Package binding decides whether a Service may hold a ledger address, and
// which MetalLB sharing key the address's holders carry. The Service
// controller (conflict detection, handoffs) and the IPAddress controller
// (conflict recovery, taken-elsewhere, placeholders) must agree exactly, or
// an address would flip between Conflict and recovery, or a placeholder and
// a workload would fail to share; so both call these functions.
package binding

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// Authorizes reports whether the address's binding authorizes svc to hold
// it: svc is the workload named by status.associatedTo, or svc is in the
// claim's namespace and carries the driver's pinned-by marker naming the
// address's claim. The second case covers both ends of a handoff: while
// attaching, before associatedTo is written, and while detaching, after
// associatedTo is cleared (and the tenant's annotation possibly removed)
// until MetalLB has taken the address back from the Service. Only the
// driver writes the marker, and only on a Service in the claim's namespace
// that asked for the claim.
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
// address carries: its placeholders, and a workload sharing it with them
// during a handoff. It is derived from the claim the address is bound to
// (names.ClaimSharingKey), so both addresses of a Dual claim have the same
// key, or from the address's name when it is bound to no claim.
func SharingKey(a *iadv1alpha1.IPAddress) string {
	if ref := a.Spec.ClaimRef; ref != nil && ref.Name != "" {
		return names.ClaimSharingKey(ref.Namespace, ref.Name, types.UID(ref.UID))
	}
	return names.AddressSharingKey(a.Name)
}

// Served reports whether the driver serves an address: its class (nil when
// it does not exist) names this driver, or the class is gone and the
// address still carries the driver's finalizer. Deleting a class revokes no
// binding: its addresses stay the driver's until they are released.
func Served(a *iadv1alpha1.IPAddress, class *iadv1alpha1.IPAddressClass) bool {
	if class != nil {
		return class.Spec.Provisioner == names.Provisioner
	}
	return slices.Contains(a.Finalizers, names.Finalizer)
}
