package hold

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// Which placeholders are the address's: its own (read by scope.go, torn
// down by teardown.go), and its claim's allocation placeholder not handed
// over yet (read by liveRecording, placeholders.go).

// ownPlaceholder reports whether a placeholder labelled with the address's
// name is its own, the only kind repaired, counted and deleted: a hold
// owner-referenced to it, or an allocation placeholder of its claim. Another
// claim's is left to that claim's controller, or both would rewrite it.
func ownPlaceholder(a *iadv1alpha1.IPAddress, ph *corev1.Service) bool {
	switch ph.Labels[marks.LabelPlaceholder] {
	case names.PlaceholderHold:
		return OwnedBy(ph, a)
	case names.PlaceholderAllocation:
		ref := a.Spec.ClaimRef
		switch {
		case ref == nil:
			return false
		case ref.UID != "":
			return ph.Labels[marks.LabelClaimUID] == ref.UID
		default:
			return ph.Annotations[marks.AnnotationClaimNamespace] == ref.Namespace && ph.Annotations[marks.AnnotationClaimName] == ref.Name
		}
	}
	return false
}

// ownPlaceholders keeps the address's own placeholders of a list.
func ownPlaceholders(a *iadv1alpha1.IPAddress, phs []corev1.Service) []corev1.Service {
	out := phs[:0:0]
	for i := range phs {
		if ownPlaceholder(a, &phs[i]) {
			out = append(out, phs[i])
		}
	}
	return out
}

// OwnedBy reports whether a Service carries an owner reference to the address.
func OwnedBy(svc *corev1.Service, a *iadv1alpha1.IPAddress) bool {
	for _, o := range svc.OwnerReferences {
		if o.UID == a.UID {
			return true
		}
	}
	return false
}

// recordingPlaceholder returns the allocation placeholder of the claim a
// is bound to (by uid) that MetalLB assigned ip and that is not handed over
// to a yet (labelled with another address or none); nil when there is none.
func recordingPlaceholder(a *iadv1alpha1.IPAddress, ip, placeholderNamespace string, holders []corev1.Service) *corev1.Service {
	ref := a.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return nil
	}
	for i := range holders {
		s := &holders[i]
		if s.Namespace != placeholderNamespace || s.DeletionTimestamp != nil ||
			s.Labels[marks.LabelPlaceholder] != names.PlaceholderAllocation || s.Labels[marks.LabelClaimUID] != ref.UID {
			continue
		}
		if l := s.Labels[marks.LabelAddress]; (l == "" || l == a.Name) && marks.Holds(s, ip) {
			return s
		}
	}
	return nil
}
