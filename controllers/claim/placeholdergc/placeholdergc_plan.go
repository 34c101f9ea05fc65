package placeholdergc

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// isOrphan decides whether an allocation placeholder is an orphan: its
// claim is gone (nil) or replaced (another uid), and it backs no IPAddress
// (no owner reference, and addr, the one its label names, is not bound to
// its claim).
func isOrphan(ph *corev1.Service, claim *iadv1alpha1.IPAddressClaim, addr *iadv1alpha1.IPAddress) bool {
	if ph.Labels[marks.LabelPlaceholder] != names.PlaceholderAllocation {
		return false
	}
	uid := ph.Labels[marks.LabelClaimUID]
	if claim != nil && string(claim.UID) == uid {
		return false
	}
	if placeholder.OwnedByAddress(ph, "") {
		return false
	}
	if label := ph.Labels[marks.LabelAddress]; label != "" && addr != nil && addr.Name == label && addr.Spec.ClaimRef != nil {
		r := addr.Spec.ClaimRef
		if r.UID == uid {
			return false
		}
		if r.UID == "" && r.Namespace == ph.Annotations[marks.AnnotationClaimNamespace] && r.Name == ph.Annotations[marks.AnnotationClaimName] {
			return false
		}
	}
	return true
}

// The GC's events: only what can make a placeholder an orphan (isOrphan).
// A claim's changes never do, its going does, and so does its being
// replaced: a claim deleted and created again while the watch was down
// comes back from the relist as an update from the old uid to the new
// one, without a delete. An address's status never does, its going or its
// claim reference changing does. The placeholder's own events cover the
// rest, the start included.
var (
	claimGone = predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(e event.UpdateEvent) bool { return e.ObjectOld.GetUID() != e.ObjectNew.GetUID() },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	addressUnbound = predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okOld := e.ObjectOld.(*iadv1alpha1.IPAddress)
			n, okNew := e.ObjectNew.(*iadv1alpha1.IPAddress)
			return !okOld || !okNew || claimRefChanged(o, n)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
)

// placeholderMarked lets through a placeholder's own events that can change
// what isOrphan reads of it: its creation (the start and the relist
// included), and an update of its labels, annotations or owner references.
// MetalLB's status writes, a third of a claim's Service events, do not;
// its deletion leaves nothing to collect.
var placeholderMarked = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return !maps.Equal(o.GetLabels(), n.GetLabels()) || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
			!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences())
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return true },
}

// claimRefChanged tells whether an address's claim reference changed.
func claimRefChanged(o, n *iadv1alpha1.IPAddress) bool {
	return !equality.Semantic.DeepEqual(o.Spec.ClaimRef, n.Spec.ClaimRef)
}
