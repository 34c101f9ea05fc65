// Package class is the class controller: it renders each IPAddressClass of
// this driver into the IPAddressPool iad-<class> and one L2 or BGP
// advertisement of that name in the MetalLB namespace, refuses a class it
// cannot render without touching its previous rendering, and keeps the
// pool of a class that is gone for the addresses still recorded under it.
package class

import (
	"context"
	"sync"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/changes"
	"github.com/cozystack/metallb-iad/internal/compact"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/queue"
)

// Controller runs the class controller: its binary (bootstrap.Main) and
// the tests (Controller.NewManager) start it the same way.
var Controller = bootstrap.NewController("class", CacheOptions,
	func(d bootstrap.Deps) bootstrap.Reconciler { return &Reconciler{Deps: d} })

// Reconciler reconciles IPAddressClasses into MetalLB pools and
// advertisements in the MetalLB namespace.
type Reconciler struct {
	bootstrap.Deps
	// Options tune the controller; the zero value suits production. (A
	// second manager in one process, as in tests, needs SkipNameValidation.)
	Options controller.Options

	// The last refusal and OverlapsLivePool report per class: every class
	// and pool change re-queues a class, and each is reported once per
	// change. Decisions never read them.
	reported, adoptReported changes.Memo
	// unsettled holds the classes whose pass has not ended rendered: set
	// before admit reads the ledger, cleared once rendered. Only they (and
	// classes gone, not the driver's or being deleted) wait on their
	// ledger (classOfLedgerEntry).
	unsettled sync.Map
}

// CacheOptions restricts the manager's cache for MetalLB's kinds to the
// MetalLB namespace: the controller neither reads nor watches them
// elsewhere. It keeps addresses without their conditions, which it
// neither reads nor writes.
func CacheOptions(o *bootstrap.Options) map[client.Object]cache.ByObject {
	only := cache.ByObject{Namespaces: map[string]cache.Config{o.MetalLBNamespace: {}}}
	return map[client.Object]cache.ByObject{
		&iadv1alpha1.IPAddress{}:           {Transform: compact.WithoutConditions},
		&metallbv1beta1.IPAddressPool{}:    only,
		&metallbv1beta1.L2Advertisement{}:  only,
		&metallbv1beta1.BGPAdvertisement{}: only,
	}
}

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
//
// The metrics endpoint asks the API server who a scraper is and whether it
// may GET /metrics (--metrics-secure).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
//
// MetalLB's kinds only in MetalLB's namespace: a Role there grants them
// (the chart renders it in its metallbNamespace).
// +kubebuilder:rbac:groups=metallb.io,namespace=metallb-system,resources=ipaddresspools;l2advertisements;bgpadvertisements,verbs=get;list;watch;create;patch;delete

// Reconcile renders one class of this driver (admit, render), or retains
// what was rendered for a class that is gone, being deleted or not this
// driver's: deleting a class revokes no binding, and what was rendered
// serves the addresses still recorded under the name.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	class := &iadv1alpha1.IPAddressClass{}
	if err := r.Get(ctx, req.NamespacedName, class); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		class = nil
	}
	s := &scope{name: req.Name, class: class}
	if class == nil || class.Spec.Provisioner != names.Provisioner || !class.DeletionTimestamp.IsZero() {
		return phase.Run(ctx, s, phase.Of(r.retain))
	}
	return phase.Run(ctx, s, phase.Of(r.admit), phase.Of(r.render))
}

// forgetClass drops the metrics and the report memos of a class.
func (r *Reconciler) forgetClass(class string) {
	forget(class)
	r.unsettled.Delete(class)
	r.reported.Forget(class)
	r.adoptReported.Forget(class)
}

// SetupWithManager registers the controller. Besides the class itself it
// watches every class of the driver (an overlap decision depends on the
// others) and the three MetalLB kinds in the MetalLB namespace (drift
// repair; a pool coming or going may also settle an overlap).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.Default(mgr, EventSource)
	if err := index.Register(context.Background(), mgr, index.AddressByClass); err != nil {
		return err
	}
	rendered := builder.WithPredicates(predicate.Or[client.Object](
		predicate.GenerationChangedPredicate{},
		predicate.LabelChangedPredicate{},
		ownerRefsChanged,
	))
	return ctrl.NewControllerManagedBy(mgr).Named("class").
		WithOptions(queue.WithQueue(r.Options)).
		For(&iadv1alpha1.IPAddressClass{}).
		Watches(&iadv1alpha1.IPAddressClass{}, handler.EnqueueRequestsFromMapFunc(r.otherClasses),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&metallbv1beta1.IPAddressPool{}, handler.EnqueueRequestsFromMapFunc(r.poolToClasses), rendered).
		Watches(&metallbv1beta1.L2Advertisement{}, handler.EnqueueRequestsFromMapFunc(r.renderedToClass), rendered).
		Watches(&metallbv1beta1.BGPAdvertisement{}, handler.EnqueueRequestsFromMapFunc(r.renderedToClass), rendered).
		Watches(&iadv1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(r.classOfLedgerEntry), builder.WithPredicates(ledgerChanged)).
		Complete(r)
}
