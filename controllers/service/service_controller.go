// Package service associates Services with claims, detaches them and
// detects conflicts.
//
// A tenant annotates a Service with local.sdn.cozystack.io/ip-address-claim.
// Once the claim is Bound, the controller hands the claim's addresses over
// from their hold placeholders to the Service. Where MetalLB lets the
// Service share an address with its placeholder (ShareProblem), it runs the
// shared handoff: (1) pin the Service with metallb.io/loadBalancerIPs, the
// claim's metallb.io/allow-shared-ip key and the driver's authorship
// markers, (2) wait until MetalLB gives the Service the addresses, shared
// with the placeholders, and (3) record status.associatedTo on each address;
// the IPAddress controller keeps the placeholders for the whole attachment,
// so the addresses are never unheld, and a detach only withdraws the
// Service's pin and grant. Otherwise it runs the gap handoff: (1) record
// status.associatedTo, (2) wait for the IPAddress controller to release the
// hold placeholder (condition Held False), and (3) pin the Service. Removing
// the annotation reverses the handoff in the same mode; deleting the
// Service lets the addresses go with it. On every Service change it also
// checks that each ledger address the Service holds in MetalLB is one its
// binding authorizes.
package service

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/changes"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/servicecache"
)

// RecorderName is the component name on the controller's Events.
const RecorderName = "metallb-iad-service"

// conflictRetry is how soon a pass that lost an optimistic-concurrency race
// runs again, re-reading everything.
const conflictRetry = 100 * time.Millisecond

// Controller runs the service controller: its binary (bootstrap.Main) and
// the tests (Controller.NewManager) start it the same way.
var Controller = bootstrap.NewController("service", servicecache.Options,
	func(d bootstrap.Deps) bootstrap.Reconciler { return &Reconciler{Deps: d} })

// Reconciler is the service controller. It reads past the cache
// (APIReader) to confirm a Service is really gone before clearing the
// associations that name it. The placeholders in the placeholder namespace
// are the only Services exempt from conflict detection. A detach takes an
// address back by withdrawing the grant label where the class pool, in the
// MetalLB namespace, requires it. Its Events come from RecorderName.
type Reconciler struct {
	bootstrap.Deps

	handoffs *handoffs
	// holders tracks, for the metric and the class Events, the Services
	// holding class addresses the ledger does not authorize.
	holders  *unauthorized
	verdicts verdicts
	imports  importOutcomes
}

// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclaims,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses/status,verbs=patch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=metallb.io,resources=ipaddresspools,verbs=get;list;watch

// Reconcile runs one pass for one Service: the import of an address MetalLB
// assigned it before the driver managed it (classes with adoptExisting),
// conflict detection, then the association decision and its idempotent
// steps.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	svc := &corev1.Service{}
	if err := r.Get(ctx, req.NamespacedName, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return patch.OnConflict(ctx, conflictRetry, ctrl.Result{}, r.forget(ctx, req.NamespacedName))
		}
		return ctrl.Result{}, err
	}
	// Earlier versions put a finalizer on the Services they attached. A
	// tenant's Service must never wait for a driver controller to be
	// deleted, so it is removed wherever it is found (an upgrade clears
	// every Service on the controller's first pass over it).
	if gone, err := r.removeFinalizer(ctx, svc); err != nil || gone {
		return patch.OnConflict(ctx, conflictRetry, ctrl.Result{}, err)
	}
	s, err := r.observe(ctx, svc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if goOn, err := r.importFirst(ctx, s); err != nil || !goOn {
		return patch.OnConflict(ctx, conflictRetry, ctrl.Result{}, err)
	}
	if err := r.detectConflicts(ctx, s); err != nil {
		return patch.OnConflict(ctx, conflictRetry, ctrl.Result{}, err)
	}

	v := Decide(s.situation())
	log.FromContext(ctx).V(1).Info("decided", "action", v.Action, "reason", v.Reason)
	// A verdict's Event is recorded once per change, not on every pass.
	if r.verdicts.changed(req.NamespacedName, svc.UID, v.Reason, v.Message) && v.EventType != "" {
		r.Recorder.Event(svc, v.EventType, v.Reason, v.Message)
		if v.Reason == ReasonClaimAlreadyAssociated {
			r.reportOtherHolder(s)
		}
	}
	switch v.Action {
	case Associate:
		return patch.OnConflict(ctx, conflictRetry, ctrl.Result{}, r.associate(ctx, s))
	case Detach:
		r.handoffs.forget(req.NamespacedName)
		_, err := r.detachAll(ctx, s)
		return patch.OnConflict(ctx, conflictRetry, ctrl.Result{}, err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the indexes the controller reads and the
// controller itself: Services, the claims they name and the addresses
// associated with them, bound to their claims or held by them.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.Default(mgr, RecorderName)
	r.handoffs = newHandoffs()
	r.holders = newUnauthorized()
	if err := index.Register(context.Background(), mgr,
		index.AddressByClaim, index.AddressByIP, index.AddressByAssociation,
		index.ServiceByClaim, index.ServiceByIngressIP); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("service").
		For(&corev1.Service{}, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Watches(&iadv1alpha1.IPAddressClaim{}, handler.EnqueueRequestsFromMapFunc(r.servicesForClaim)).
		Watches(&iadv1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(r.servicesForAddress)).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.sharersOfPlaceholder)).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.waitersForPinnedClaim)).
		Watches(&iadv1alpha1.IPAddressClass{}, handler.EnqueueRequestsFromMapFunc(r.servicesForClass),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// sharersOfPlaceholder maps a placeholder (a Service exempt from conflict
// detection) to the other Services that hold its IPs, and to the Service
// the attach grant of its address names: a Service detached in a shared
// handoff waits until the cache shows a placeholder holding its addresses
// again, and one attaching in a shared handoff waits until the placeholder
// carries the claim's sharing key. The handler calls it with the old and
// the new object.
func (r *Reconciler) sharersOfPlaceholder(ctx context.Context, o client.Object) []reconcile.Request {
	ph, ok := o.(*corev1.Service)
	if !ok || !binding.Exempt(ph, r.PlaceholderNamespace) {
		return nil
	}
	var reqs []reconcile.Request
	if name := ph.Labels[names.LabelAddress]; name != "" {
		a := &iadv1alpha1.IPAddress{}
		if err := r.Get(ctx, types.NamespacedName{Name: name}, a); err == nil {
			if ns, svc, ok := strings.Cut(a.Annotations[names.AnnotationAttaching], "/"); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: svc}})
			}
		}
	}
	for _, ip := range binding.IngressIPs(ph) {
		for _, req := range r.servicesByIndex(ctx, index.ServiceByIngressIP, ip) {
			if req.Namespace != r.PlaceholderNamespace {
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}

// waitersForPinnedClaim maps a Service carrying the driver's pin for a
// claim to the other Services that name that claim. While a Service on its
// way out still carries the pin, a Service that asks for the same claim
// waits (WaitingForDetach); the last step of that detach changes only the
// Service (the pin and the marker go), so that change must wake the
// waiter. The handler calls it with the old and the new object, so the
// change that removes the marker is seen with the claim it named.
func (r *Reconciler) waitersForPinnedClaim(ctx context.Context, o client.Object) []reconcile.Request {
	claim := o.GetAnnotations()[names.AnnotationPinnedBy]
	if claim == "" {
		return nil
	}
	var reqs []reconcile.Request
	for _, req := range r.servicesByIndex(ctx, index.ServiceByClaim, index.Key(o.GetNamespace(), claim)) {
		if req.Name != o.GetName() {
			reqs = append(reqs, req)
		}
	}
	return reqs
}

// servicesForClaim maps a claim to the Services that name it.
func (r *Reconciler) servicesForClaim(ctx context.Context, o client.Object) []reconcile.Request {
	return r.servicesByIndex(ctx, index.ServiceByClaim, index.Key(o.GetNamespace(), o.GetName()))
}

// servicesForAddress maps an address to the Service it is associated with,
// the Services that name its claim, and the Services that hold its IP.
// The handler calls it with the old and the new object, so a Service an
// address stops naming hears about it too.
func (r *Reconciler) servicesForAddress(ctx context.Context, o client.Object) []reconcile.Request {
	a := o.(*iadv1alpha1.IPAddress)
	var reqs []reconcile.Request
	if at := a.Status.AssociatedTo; at != nil && at.Kind == "Service" {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: at.Namespace, Name: at.Name}})
	}
	if ref := a.Spec.ClaimRef; ref != nil {
		reqs = append(reqs, r.servicesByIndex(ctx, index.ServiceByClaim, index.Key(ref.Namespace, ref.Name))...)
	}
	for _, ip := range addressIPs([]*iadv1alpha1.IPAddress{a}) {
		reqs = append(reqs, r.servicesByIndex(ctx, index.ServiceByIngressIP, ip)...)
	}
	return reqs
}

func (r *Reconciler) servicesByIndex(ctx context.Context, field, key string) []reconcile.Request {
	var list corev1.ServiceList
	if err := r.List(ctx, &list, client.MatchingFields{field: key}); err != nil {
		log.FromContext(ctx).Error(err, "cannot list Services by index", "index", field, "key", key)
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return reqs
}

// verdicts remembers, per Service, the last verdict Event recorded, so each
// is recorded once per change.
type verdicts struct{ memo changes.Memo }

// changed records the verdict for the Service and reports whether it
// differs from the last one recorded for it.
func (v *verdicts) changed(key types.NamespacedName, uid types.UID, reason, message string) bool {
	value := ""
	if reason != "" {
		value = string(uid) + "\x00" + reason + "\x00" + message
	}
	return v.memo.Changed(key.String(), value)
}

func (v *verdicts) forget(key types.NamespacedName) { v.memo.Forget(key.String()) }
