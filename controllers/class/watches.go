package class

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// classOfLedgerEntry maps an IPAddress to its class while the class may
// wait on its ledger: not rendered yet by this process (refused: one that
// would drop addresses in use is rendered once they are gone), gone, not
// the driver's or being deleted (its pool is kept while addresses recorded
// under its name exist). A class rendered as it is reads nothing of its
// ledger: a claim's address changes nothing for it, and a burst of claims
// costs it no pass.
func (r *Reconciler) classOfLedgerEntry(ctx context.Context, o client.Object) []reconcile.Request {
	a, ok := o.(*iadv1alpha1.IPAddress)
	if !ok || a.Spec.ClassName == "" {
		return nil
	}
	class := &iadv1alpha1.IPAddressClass{}
	err := r.Get(ctx, types.NamespacedName{Name: a.Spec.ClassName}, class)
	if _, unsettled := r.unsettled.Load(a.Spec.ClassName); err == nil && !unsettled &&
		class.Spec.Provisioner == names.Provisioner && class.DeletionTimestamp.IsZero() {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: a.Spec.ClassName}}}
}

// ledgerChanged passes the IPAddress events that can change what a class
// change drops, or what its refusal says (ledgerEntryChanged): a refusal
// decided before the cache saw an attachment is told again, naming the
// Service.
var ledgerChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return true },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*iadv1alpha1.IPAddress), e.ObjectNew.(*iadv1alpha1.IPAddress)
		return ledgerEntryChanged(o, n)
	},
}

// ledgerEntryChanged tells whether an IPAddress changed in what a class
// change drops or what DroppedMessage says about it.
func ledgerEntryChanged(o, n *iadv1alpha1.IPAddress) bool {
	return (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
		o.Spec.ClassName != n.Spec.ClassName ||
		!equality.Semantic.DeepEqual(o.Spec.ClaimRef, n.Spec.ClaimRef) ||
		!equality.Semantic.DeepEqual(o.Status.AssociatedTo, n.Status.AssociatedTo)
}

// renderedToClass maps a MetalLB object to the class it was rendered for
// (by label) and to the class whose name it
// bears (iad-<class>), which someone else's object may block.
func (r *Reconciler) renderedToClass(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != r.MetalLBNamespace {
		return nil
	}
	set := map[string]bool{}
	if class, ok := strings.CutPrefix(o.GetName(), names.PoolName("")); ok && class != "" {
		set[class] = true
	}
	if o.GetLabels()[marks.LabelManagedBy] == ManagedBy && o.GetLabels()[marks.KeyClass] != "" {
		set[o.GetLabels()[marks.KeyClass]] = true
	}
	out := make([]reconcile.Request, 0, len(set))
	for name := range set {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	return out
}

// poolToClasses maps a pool to its class and, since a pool can settle or
// cause an overlap, to every class of the driver.
func (r *Reconciler) poolToClasses(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != r.MetalLBNamespace {
		return nil
	}
	return append(r.renderedToClass(ctx, o), r.ourClasses(ctx, "")...)
}

// otherClasses maps a class event to every other class of the driver.
func (r *Reconciler) otherClasses(ctx context.Context, o client.Object) []reconcile.Request {
	return r.ourClasses(ctx, o.GetName())
}

// ourClasses lists this driver's classes from the cache, except skip.
func (r *Reconciler) ourClasses(ctx context.Context, skip string) []reconcile.Request {
	var classes iadv1alpha1.IPAddressClassList
	if err := r.List(ctx, &classes); err != nil {
		log.FromContext(ctx).Error(err, "cannot list IPAddressClasses from the cache")
		return nil
	}
	var out []reconcile.Request
	for _, c := range classes.Items {
		if c.Spec.Provisioner == names.Provisioner && c.Name != skip {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: c.Name}})
		}
	}
	return out
}

// ownerRefsChanged passes updates that change the owner references (a
// hand-removed controller reference is repaired).
var ownerRefsChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.GetOwnerReferences(), e.ObjectNew.GetOwnerReferences())
	},
}
