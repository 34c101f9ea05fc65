// Package class renders MetalLB's configuration for every IPAddressClass
// that names this driver: one IPAddressPool iad-<class> and one
// advertisement of the same name selecting only that pool (an
// L2Advertisement, or a BGPAdvertisement with advertisement: BGP), both in
// the MetalLB namespace, labelled with RenderedLabels and controlled by the
// class, so the garbage collector removes them with it.
//
// A class's spec.parameters are parsed once by ParseParameters and turned
// into objects by Render; both are pure. The reconciler creates or patches
// the two objects in place (their uid never changes), removes an
// advertisement of the other kind after a switch between L2 and BGP, and
// undoes hand edits and deletions of what it rendered, because it watches
// the three MetalLB kinds in the MetalLB namespace.
//
// A class is refused, and nothing of it is rendered half-way, when its name
// is too long to make a pool name (InvalidClassName), when its parameters
// are invalid (InvalidParameters), when its addresses overlap those of an
// older class of this driver or of any other IPAddressPool in the MetalLB
// namespace (OverlappingRanges; MetalLB refuses its whole configuration when
// two pools overlap; a class with adoptExisting may overlap pools this
// driver did not render, to take over what MetalLB assigned from them, and
// says so with an OverlapsLivePool Warning), or when an object named iad-<class> exists and is
// controlled by something else (PoolNameTaken). Of two overlapping classes,
// the older one (by creationTimestamp, then name) keeps the addresses; a
// pool still rendered for a newer class blocks an older class from growing
// into it until one of the two changes. A refusal leaves the
// previous rendering of the class untouched: addresses already handed out
// from it stay valid. IPAddressClass has no status subresource, so a
// refusal is reported as a Warning Event on the class (reason as above,
// the message naming the exact problem), as a log line, and in the
// metallb_iad_class_refused metric. A successful change is reported as a
// Normal Event Rendered.
//
// To find the classes an overlap is checked against, the reconciler lists
// IPAddressClasses from the informer cache: classes are few, and every class
// change re-queues all of this driver's classes so that a refused class is
// rendered as soon as the older class it collided with moves away.
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
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
)

// EventSource is the component name of the class controller's Events.
const EventSource = "metallb-iad-class"

// Event reasons of the class controller.
const (
	// ReasonRendered (Normal): the pool or advertisement was created, updated or removed.
	ReasonRendered = "Rendered"
	// ReasonInvalidParameters (Warning): spec.parameters are refused.
	ReasonInvalidParameters = "InvalidParameters"
	// ReasonInvalidClassName (Warning): the class name cannot make a pool name.
	ReasonInvalidClassName = "InvalidClassName"
	// ReasonOverlappingRanges (Warning): the addresses overlap an older class or another pool.
	ReasonOverlappingRanges = "OverlappingRanges"
	// ReasonOverlapsLivePool (Warning): a class with adoptExisting is
	// rendered over the ranges of a pool this driver did not render; MetalLB
	// serves neither change until the administrator removes the overlap.
	ReasonOverlapsLivePool = "OverlapsLivePool"
	// ReasonPoolNameTaken (Warning): iad-<class> exists and is controlled by something else.
	ReasonPoolNameTaken = "PoolNameTaken"
	// ReasonWaitingForGrant (Normal): the pool, rendered without the grant
	// selector, gains it once every address of the class is Granted.
	ReasonWaitingForGrant = "WaitingForGrant"
	// ReasonAddressesInUse (Warning): the new addresses leave out addresses
	// of the rendered pool that IPAddresses of the class still hold.
	ReasonAddressesInUse = "AddressesInUse"
)

// Controller runs the class controller: its binary (bootstrap.Main) and
// the tests (Controller.NewManager) start it the same way.
var Controller = bootstrap.NewController("class", CacheOptions,
	func(d bootstrap.Deps) bootstrap.Reconciler { return &Reconciler{Deps: d} })

// Reconciler reconciles IPAddressClasses into MetalLB pools and
// advertisements in the MetalLB namespace. Its Events come from
// EventSource.
type Reconciler struct {
	bootstrap.Deps
	// Options tune the controller; the zero value suits production. (A
	// second manager in one process, as in tests, needs SkipNameValidation.)
	Options controller.Options

	// reported remembers, per class, the last refusal reported as an Event,
	// so that the many passes a refused class goes through (every class and
	// pool change re-queues it) repeat no Event; decisions never read it.
	reported sync.Map
	// grantReported remembers, per class, the last WaitingForGrant message.
	grantReported sync.Map
	// adoptReported remembers, per class, the last OverlapsLivePool message.
	adoptReported sync.Map
}

// CacheOptions restricts the manager's cache for MetalLB's kinds to the
// MetalLB namespace: the controller neither reads nor watches them elsewhere.
func CacheOptions(o *bootstrap.Options) map[client.Object]cache.ByObject {
	only := cache.ByObject{Namespaces: map[string]cache.Config{o.MetalLBNamespace: {}}}
	return map[client.Object]cache.ByObject{
		&metallbv1beta1.IPAddressPool{}:    only,
		&metallbv1beta1.L2Advertisement{}:  only,
		&metallbv1beta1.BGPAdvertisement{}: only,
	}
}

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=get;list;watch
// +kubebuilder:rbac:groups=metallb.io,resources=ipaddresspools;l2advertisements;bgpadvertisements,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile renders one class. For a class that is gone, being deleted or
// not this driver's, it keeps what was rendered under the name for as long
// as addresses recorded under it exist (retain), and withdraws it after.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	class := &iadv1alpha1.IPAddressClass{}
	if err := r.Get(ctx, req.NamespacedName, class); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		class = nil
	}
	if class == nil || class.Spec.Provisioner != names.Provisioner || !class.DeletionTimestamp.IsZero() {
		// What was rendered serves the addresses still recorded under the
		// name: deleting a class revokes no binding.
		forget(req.Name)
		r.reported.Delete(req.Name)
		r.grantReported.Delete(req.Name)
		r.adoptReported.Delete(req.Name)
		return ctrl.Result{}, r.retain(ctx, req.Name)
	}

	params, ref, err := r.decide(ctx, class)
	if err != nil {
		return ctrl.Result{}, err
	}
	if ref != nil {
		r.refuse(ctx, class, ref)
		return ctrl.Result{}, nil
	}
	return r.render(ctx, class, params)
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
		WithOptions(r.Options).
		For(&iadv1alpha1.IPAddressClass{}).
		Watches(&iadv1alpha1.IPAddressClass{}, handler.EnqueueRequestsFromMapFunc(r.otherClasses),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&metallbv1beta1.IPAddressPool{}, handler.EnqueueRequestsFromMapFunc(r.poolToClasses), rendered).
		Watches(&iadv1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(r.addressToClass)).
		Watches(&metallbv1beta1.L2Advertisement{}, handler.EnqueueRequestsFromMapFunc(r.renderedToClass), rendered).
		Watches(&metallbv1beta1.BGPAdvertisement{}, handler.EnqueueRequestsFromMapFunc(r.renderedToClass), rendered).
		Watches(&iadv1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(addressToClass), builder.WithPredicates(ledgerChanged)).
		Complete(r)
}
