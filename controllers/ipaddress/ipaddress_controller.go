// Package ipaddress enforces the holding invariant on IPAddresses: a
// placeholder Service pinned to the address exists exactly while the
// address exists and is not attached to a workload that cannot share it
// (in a shared attachment the placeholder stays beside the workload). Held
// False, the hold released, is the Service controller's signal to pin the
// workload. The controller also tears addresses down, marks them Lost and
// hands them back from Conflict.
package ipaddress

import (
	"context"
	"strings"
	"sync"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/ipaddress/hold"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/queue"
	"github.com/cozystack/metallb-iad/internal/servicecache"
)

// ControllerName is the IPAddress controller's name, in logs and metrics.
const ControllerName = "ipaddress"

// EventSource is the component name on the Events the controller records.
const EventSource = "metallb-iad-ipaddress"

// lookAgain is the fallback look of a pass that waits for the cache or the
// API server to move on, the hold's (hold.LookAgain).
const lookAgain = hold.LookAgain

// Controller runs the ipaddress controller, in its binary and in the tests.
var Controller = bootstrap.NewController(ControllerName, CacheOptions,
	func(d bootstrap.Deps) bootstrap.Reconciler { return &Reconciler{Keeper: hold.Keeper{Deps: d}} })

// CacheOptions are servicecache.Options: every Service, trimmed, and the
// pools of MetalLB's namespace.
func CacheOptions(o *bootstrap.Options) map[client.Object]cache.ByObject {
	return servicecache.Options(o.MetalLBNamespace)
}

// Reconciler is the IPAddress controller. It reads from the API server
// (APIReader) where a stale cache must not decide: whether an attached
// Service is gone, whether a placeholder is absent before one is created
// or the hold reported released, and whether a claim exists.
type Reconciler struct {
	// Keeper keeps the addresses held (package hold): the controller's
	// dependencies, and the count of the Services holding an address.
	hold.Keeper
	// Options tune the controller (MaxConcurrentReconciles defaults to 4).
	Options controller.Options

	states addressStates
	// lostAnnounced holds the uids of the Lost addresses whose AddressLost
	// Warning this process recorded or found recorded.
	lostAnnounced sync.Map
	// unserved times the attachments whose Service holds nothing yet
	// (serving.go).
	unserved unservedAttachments
	// written keeps a pass on a cache that has not shown the last status
	// write from writing the same report again into a conflict.
	written patch.Written
}

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses/status,verbs=get;patch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses/finalizers,verbs=update
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclaims,verbs=get
//
// The metrics endpoint asks the API server who a scraper is and whether it
// may GET /metrics (--metrics-secure).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
//
// Services are created and deleted in any namespace: placeholders, and the
// headless Services that clear a stale MetalLB allocation (stale.Clear).
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;patch;create;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch;list
//
// The class pools, read only in MetalLB's namespace (a Role there).
// +kubebuilder:rbac:groups=metallb.io,namespace=metallb-system,resources=ipaddresspools,verbs=get;list;watch

// Reconcile enforces the holding invariant on one address, re-derived from
// the cluster on every pass: an address being deleted is torn down, any
// other goes through the phases in order.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	a := &iadv1alpha1.IPAddress{}
	if err := r.Get(ctx, req.NamespacedName, a); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &scope{Scope: hold.Scope{Addr: a, Key: r.Keys.Now().Of(a)}, orig: a.DeepCopy()}
	if before, ok := r.Keys.Before(); ok {
		s.KeyBefore = before.Of(a)
	}
	if a.DeletionTimestamp != nil {
		return phase.Run(ctx, s,
			phase.Of(r.awaitCache), // report.go
			phase.Of(r.teardown),   // teardown.go
		)
	}
	return phase.Run(ctx, s,
		phase.Of(r.awaitCache),               // report.go
		phase.Of(r.loadClass),                // admit.go
		phase.Of(r.checkServed),              // admit.go
		phase.Of(r.ensureFinalizer),          // admit.go
		phase.Of(r.parseAddress),             // admit.go
		phase.Of(r.clearStaleAssociation),    // association.go
		phase.Of(r.detectLost),               // lost.go
		phase.Of(r.recoverConflict),          // conflicts.go
		phase.Part(holdScope, r.EnforceHold), // hold/hold.go
		phase.Part(holdScope, r.ClearStale),  // hold/hold.go
		phase.Of(r.checkServing),             // serving.go
		phase.Of(r.reportStatus),             // report.go
		phase.Part(holdScope, r.CreateHold),  // hold/hold.go
	)
}

// holdScope is the hold's part of the pass's scope.
func holdScope(s *scope) *hold.Scope { return &s.Scope }

// forget drops what the controller keeps about an address that is gone.
func (r *Reconciler) forget(name string) {
	r.states.forget(name)
	r.unserved.forget(name)
	r.written.Forget(name)
}

// SetupWithManager registers the indexes and the controller with its
// watches: IPAddresses, Services, classes and the classes' pools.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.Default(mgr, EventSource)
	if err := index.Register(context.Background(), mgr,
		index.AddressByIP, index.AddressByAssociation, index.AddressByClass, index.AddressByClaim,
		index.ServiceByIngressIP, index.ServiceByPinnedIP, index.PlaceholderByAddress,
	); err != nil {
		return err
	}
	svcInformer, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Service{})
	if err != nil {
		return err
	}
	if _, err := svcInformer.AddEventHandler(r.Allocated.Handler()); err != nil {
		return err
	}
	opts := r.Options
	if opts.MaxConcurrentReconciles == 0 {
		opts.MaxConcurrentReconciles = 4
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&iadv1alpha1.IPAddress{}).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.addressesForService)).
		Watches(&iadv1alpha1.IPAddressClass{}, handler.EnqueueRequestsFromMapFunc(r.addressesForClass)).
		Watches(&metallbv1beta1.IPAddressPool{}, handler.EnqueueRequestsFromMapFunc(r.addressesForPool),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(r.Keys.Rotations(handler.EnqueueRequestsFromMapFunc(r.everyAddress))).
		WithOptions(queue.WithQueue(opts)).
		Complete(r)
}

// addressesForService maps a Service to the addresses it concerns: the one
// a placeholder's label names, those associated to it, those of the claim
// it asks for, and those of its ingress IPs. It sees the old and the new
// object, so a Service that lost an IP or was deleted reaches them too.
func (r *Reconciler) addressesForService(ctx context.Context, o client.Object) []reconcile.Request {
	svc, ok := o.(*corev1.Service)
	if !ok {
		return nil
	}
	want := map[string]bool{}
	if svc.Namespace == r.PlaceholderNamespace {
		if v := svc.Labels[marks.LabelAddress]; v != "" {
			want[v] = true
		}
	}
	lookups := []client.MatchingFields{{index.AddressByAssociation: index.Key(svc.Namespace, svc.Name)}}
	if claim := marks.ClaimOf(svc); claim != "" {
		// Whether it can share decides their hold's key (sharesSoon).
		lookups = append(lookups, client.MatchingFields{index.AddressByClaim: index.Key(svc.Namespace, claim)})
	}
	for _, ip := range marks.IngressIPs(svc) {
		lookups = append(lookups, client.MatchingFields{index.AddressByIP: ip})
	}
	for _, m := range lookups {
		var list iadv1alpha1.IPAddressList
		if err := r.List(ctx, &list, m, client.UnsafeDisableDeepCopy); err != nil {
			log.FromContext(ctx).Error(err, "cannot look up addresses for a Service", "service", client.ObjectKeyFromObject(svc))
			continue
		}
		for i := range list.Items {
			want[list.Items[i].Name] = true
		}
	}
	return requests(want)
}

// everyAddress maps a rotation of the sharing key to every address: each
// pass derives its hold's key anew and re-stamps the holds that carry one.
func (r *Reconciler) everyAddress(ctx context.Context, _ client.Object) []reconcile.Request {
	var list iadv1alpha1.IPAddressList
	if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "cannot list the addresses to re-stamp with the rotated sharing key")
		return nil
	}
	want := map[string]bool{}
	for i := range list.Items {
		want[list.Items[i].Name] = true
	}
	return requests(want)
}

// addressesForClass maps a class to its addresses, so a class created after
// its addresses serves them.
func (r *Reconciler) addressesForClass(ctx context.Context, o client.Object) []reconcile.Request {
	var list iadv1alpha1.IPAddressList
	if err := r.List(ctx, &list, client.MatchingFields{index.AddressByClass: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "cannot look up the addresses of a class", "class", o.GetName())
		return nil
	}
	want := map[string]bool{}
	for i := range list.Items {
		want[list.Items[i].Name] = true
	}
	return requests(want)
}

// addressesForPool maps a class's pool to the class's addresses, which a
// change may make Lost or recover.
func (r *Reconciler) addressesForPool(ctx context.Context, o client.Object) []reconcile.Request {
	class, ok := strings.CutPrefix(o.GetName(), names.PoolName(""))
	if o.GetNamespace() != r.MetalLBNamespace || !ok || class == "" {
		return nil
	}
	return r.addressesForClass(ctx, &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: class}})
}

func requests(set map[string]bool) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(set))
	for n := range set {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	}
	return out
}
