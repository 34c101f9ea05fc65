// Package ipaddress enforces the holding invariant on IPAddresses, tears them
// down and recovers them from conflicts.
//
// The holding invariant: a placeholder Service pinned to the address exists
// exactly while the IPAddress exists and is not associated to a live
// workload that cannot share it. In a shared attachment (the workload
// carries the address's sharing key and can share it with the placeholder)
// the placeholder keeps holding the address beside the workload, so a
// detach or the workload's deletion leaves it held. The controller reports
// it in the Held condition; Held False (the hold released for a workload
// that cannot share) is the Service controller's signal to pin that
// workload. On deletion its finalizer
// deletes the placeholders (releasing MetalLB's allocation) and withdraws
// the pins the driver wrote. An address in phase Conflict is handed back to
// Bound or Available once no Service holds it without authority.
package ipaddress

import (
	"context"
	"strings"
	"sync"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/servicecache"
)

// ControllerName is the IPAddress controller's name, in logs and metrics.
const ControllerName = "ipaddress"

// EventSource is the component name on the Events the controller records.
const EventSource = "metallb-iad-ipaddress"

// retryAfter is how soon a pass that lost an optimistic-lock race, or that
// waits for the cache to catch up with the API server, is retried. The
// watches usually bring the object back sooner.
const retryAfter = time.Second

// Controller runs the ipaddress controller: its binary (bootstrap.Main) and
// the tests (Controller.NewManager) start it the same way.
var Controller = bootstrap.NewController(ControllerName, servicecache.Options,
	func(d bootstrap.Deps) bootstrap.Reconciler { return &Reconciler{Deps: d} })

// Reconciler is the IPAddress controller. It reads straight from the API
// server (APIReader) where a stale cache must not decide: whether a Service
// named by associatedTo is really gone, whether a placeholder really is
// absent before one is created or the hold is reported released, and
// whether a claim exists. An address its class's pool in the MetalLB
// namespace does not contain is Lost. Its Events on IPAddresses and
// Services come from EventSource.
type Reconciler struct {
	bootstrap.Deps
	// Options tune the controller; the zero value suits production
	// (MaxConcurrentReconciles then defaults to 4). A second manager in one
	// process, as in tests, needs SkipNameValidation.
	Options controller.Options

	states addressStates
	// allocated counts the Services holding a load-balancer address, the
	// size of a MetalLB full pass (stale.go).
	allocated allocatedServices
	// lostAnnounced holds the uids of the Lost addresses whose AddressLost
	// Warning this process recorded or found recorded.
	lostAnnounced sync.Map
	// written remembers the version each status write was locked to, so
	// that a pass on a cache that has not shown the write yet stops
	// instead of writing the same report again into a conflict.
	written patch.Written
}

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses/status,verbs=get;patch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses/finalizers,verbs=update
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclaims,verbs=get
//
// Services are created and deleted in any namespace: placeholders in the
// placeholder namespace, and, wherever MetalLB still books an address for a
// Service that no longer exists, a short-lived headless Service of that
// name, deleted again by uid at once (stale.go). MetalLB's AllocationFailed
// Events are read to find those.
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;patch;create;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch;list
// +kubebuilder:rbac:groups=metallb.io,resources=ipaddresspools,verbs=get;list;watch

// Reconcile enforces the holding invariant on one address, re-derived from
// the cluster on every pass: fetch, teardown when deleted, finalizer, then
// the steps (clear a stale association, recover from Conflict, hold or
// release) and one status patch of what this controller owns.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	a := &iadv1alpha1.IPAddress{}
	if err := r.Get(ctx, req.NamespacedName, a); err != nil {
		if apierrors.IsNotFound(err) {
			r.states.forget(req.Name)
			r.written.Forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if r.written.Behind(a.Name, a.ResourceVersion) {
		// The write's own event brings the address back; the requeue is
		// only a safety net.
		log.FromContext(ctx).V(1).Info("the cache has not shown this controller's last status write yet")
		return ctrl.Result{RequeueAfter: retryAfter}, nil
	}
	if a.DeletionTimestamp != nil {
		r.states.forget(a.Name)
		res, err := r.teardown(ctx, a)
		return patch.OnConflict(ctx, retryAfter, res, err)
	}

	class, err := r.class(ctx, a.Spec.ClassName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !served(a, class) {
		r.states.forget(a.Name)
		return ctrl.Result{}, nil
	}
	if err := r.ensureFinalizer(ctx, a); err != nil {
		return patch.OnConflict(ctx, retryAfter, ctrl.Result{}, err)
	}

	s, err := r.newScope(ctx, a)
	if err != nil || s == nil {
		return ctrl.Result{}, err
	}
	s.class = class
	var res ctrl.Result
	for _, step := range []func(context.Context, *scope) (ctrl.Result, error){
		r.clearStaleAssociation,
		r.detectLost,
		r.recoverConflict,
		r.enforceHold,
		r.checkServing,
	} {
		sr, err := step(ctx, s)
		if err != nil {
			return patch.OnConflict(ctx, retryAfter, ctrl.Result{}, err)
		}
		res = patch.Sooner(res, sr)
	}
	wait, err := r.patchStatus(ctx, s)
	if err != nil {
		return patch.OnConflict(ctx, retryAfter, ctrl.Result{}, err)
	}
	if wait > 0 {
		return patch.Sooner(res, ctrl.Result{RequeueAfter: wait}), nil
	}
	r.states.set(a.Name, a.Spec.ClassName, addressState(s.addr))
	return res, nil
}

// SetupWithManager registers the indexes the controller reads and the
// controller with its watches: IPAddresses; Services (a placeholder maps to
// the address its label names, any Service to the addresses associated to
// it and to the addresses of the IPs in its load-balancer status); classes
// (to the addresses of the class).
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
	if _, err := svcInformer.AddEventHandler(r.allocated.handler()); err != nil {
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
		WithOptions(opts).
		Complete(r)
}

// addressesForService maps a Service event to the addresses it concerns: the
// address a placeholder's label names, the addresses associated to the
// Service, the addresses of the claim it asks for, and the addresses of
// every IP MetalLB assigned it. The handler
// calls it with the old and the new object, so a Service that lost an IP or
// was deleted reaches the address too.
func (r *Reconciler) addressesForService(ctx context.Context, o client.Object) []reconcile.Request {
	svc, ok := o.(*corev1.Service)
	if !ok {
		return nil
	}
	want := map[string]bool{}
	if svc.Namespace == r.PlaceholderNamespace {
		if v := svc.Labels[names.LabelAddress]; v != "" {
			want[v] = true
		}
	}
	lookups := []client.MatchingFields{{index.AddressByAssociation: index.Key(svc.Namespace, svc.Name)}}
	if claim := strings.TrimSpace(svc.Annotations[iadv1alpha1.ServiceClaimAnnotation]); claim != "" {
		// The addresses of the claim it asks for: whether it can share
		// decides their hold's sharing key (sharesSoon).
		lookups = append(lookups, client.MatchingFields{index.AddressByClaim: index.Key(svc.Namespace, claim)})
	}
	for _, ip := range binding.IngressIPs(svc) {
		lookups = append(lookups, client.MatchingFields{index.AddressByIP: ip})
	}
	for _, m := range lookups {
		var list iadv1alpha1.IPAddressList
		if err := r.List(ctx, &list, m); err != nil {
			log.FromContext(ctx).Error(err, "cannot look up addresses for a Service", "service", client.ObjectKeyFromObject(svc))
			continue
		}
		for i := range list.Items {
			want[list.Items[i].Name] = true
		}
	}
	return requests(want)
}

// addressesForClass maps a class event to the addresses of that class, so a
// class appearing after its addresses (static pre-provisioning) serves them.
func (r *Reconciler) addressesForClass(ctx context.Context, o client.Object) []reconcile.Request {
	var list iadv1alpha1.IPAddressList
	if err := r.List(ctx, &list, client.MatchingFields{index.AddressByClass: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "cannot look up the addresses of a class", "class", o.GetName())
		return nil
	}
	want := map[string]bool{}
	for i := range list.Items {
		want[list.Items[i].Name] = true
	}
	return requests(want)
}

// addressesForPool maps a pool in the MetalLB namespace named iad-<class>
// (created, deleted, or its addresses edited) to the addresses of that
// class, which may be Lost or recovered by the change.
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
