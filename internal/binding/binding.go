// Package binding decides whether a Service may hold a ledger address. The
// Service controller (conflict detection) and the IPAddress controller
// (conflict recovery, taken-elsewhere) must agree exactly, or an address
// would flip between Conflict and recovery; so both call this one function.
package binding

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// Authorizes reports whether the address's binding authorizes svc to hold
// it: svc is the workload named by status.associatedTo, or — during the
// handoff, before associatedTo is visible everywhere — svc names the
// address's claim (in the claim's namespace) with the tenant annotation and
// carries the driver's pinned-by marker for that claim.
func Authorizes(a *iadv1alpha1.IPAddress, svc *corev1.Service) bool {
	if at := a.Status.AssociatedTo; at != nil && at.Kind == "Service" && at.Namespace == svc.Namespace && at.Name == svc.Name {
		return true
	}
	ref := a.Spec.ClaimRef
	if ref == nil || ref.Name == "" || ref.Namespace != svc.Namespace {
		return false
	}
	claim := svc.Annotations[iadv1alpha1.ServiceClaimAnnotation]
	return claim == ref.Name && svc.Annotations[names.AnnotationPinnedBy] == ref.Name
}
