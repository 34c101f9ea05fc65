// Package claim reserves addresses for claims through MetalLB placeholder
// Services and records them as IPAddresses.
//
// For every claim the core stamped with this driver's provisioner, and for
// every family the claim still misses, the controller creates an allocation
// placeholder (a selectorless LoadBalancer Service drawing from the class
// pool), waits for MetalLB to assign it an address, pins the placeholder to
// that address, records it as an IPAddress pre-bound to the claim and hands
// the placeholder over to that IPAddress. A second, small controller
// (claim-placeholder-gc) deletes allocation placeholders whose claim is gone
// before their address was recorded.
package claim

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/changes"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/servicecache"
)

// ControllerName is the claim controller's name, in logs and metrics.
const ControllerName = "claim"

// GCControllerName is the name of the controller that deletes orphaned
// allocation placeholders.
const GCControllerName = "claim-placeholder-gc"

// conflictRetry is how soon a pass that hit an optimistic-lock conflict runs again.
const conflictRetry = time.Second

// EventSource is the component name on the Events the claim controller records.
const EventSource = "metallb-iad-claim"

// Controller runs the claim controller: its binary (bootstrap.Main) and
// the tests (Controller.NewManager) start it the same way.
var Controller = bootstrap.NewController(ControllerName, CacheOptions,
	func(d bootstrap.Deps) bootstrap.Reconciler { return &Reconciler{Deps: d} })

// Reconciler is the claim controller. It reads straight from the API
// server (APIReader) only where a stale cache must not decide: after an
// AlreadyExists answer, and before deleting an orphaned placeholder. Its
// Events on claims come from EventSource.
type Reconciler struct {
	bootstrap.Deps
	// Options tune the claim controller and the placeholder garbage
	// collector; the zero value suits production. (A second manager in one
	// process, as in tests, needs SkipNameValidation.)
	Options controller.Options

	pending pendingClaims
	// blocked holds the pending claims blocked on their class's ledger
	// (scope.blockedOnClass), which the address watch wakes.
	blocked pendingClaims
	// reported remembers what was last said on each claim, so Events (and
	// the pool_exhausted counter) follow changes, not passes.
	reported changes.Memo

	// told remembers, per claim and family, the last waiting Event recorded,
	// so a claim that waits through many passes is told once per change;
	// decisions never read it.
	told sync.Map

	// pauses holds, per claim and family, the pause after an address was
	// given back (drawPauses).
	pauses drawPauses
	// written remembers the version each patch of an allocation
	// placeholder was locked to, so that a pass on a cache that has not
	// shown the patch yet waits for it instead of patching again into a
	// conflict.
	written patch.Written
	// draws serializes, per class, the decision to draw an address and the
	// draw, with the warm controller's (drawLocks).
	draws drawLocks
	// cleared remembers the Services whose stale MetalLB allocation was
	// cleared lately (staleClearer), shared with the warm controller.
	cleared staleMemo
}

// memoKey names one family of one claim (by uid) in the controller's
// memos: told and pauses.
func memoKey(c *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily) string {
	return string(c.UID) + "/" + string(f)
}

// tell records a waiting Event on the claim unless the same one was the
// last recorded for that family, and reports whether it recorded it.
func (r *Reconciler) tell(c *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily, eventType, reason, msg string) bool {
	key := memoKey(c, f)
	if last, ok := r.told.Swap(key, reason+"\x00"+msg); ok && last == reason+"\x00"+msg {
		return false
	}
	r.Recorder.Event(c, eventType, reason, msg)
	return true
}

// untell forgets the last waiting Event of a family that stopped waiting.
func (r *Reconciler) untell(c *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily) {
	r.told.Delete(memoKey(c, f))
}

// CacheOptions narrows the manager's cache to what the claim controller
// reads: Services only in the placeholder namespace and only placeholders
// (labelled names.LabelPlaceholder), trimmed as the other controllers trim
// theirs (servicecache.Trim: the claim controller only patches them), and
// of Events only MetalLB's AllocationFailed reports in that namespace. The binary and the tests both
// build their manager with it.
func CacheOptions(o *bootstrap.Options) map[client.Object]cache.ByObject {
	isPlaceholder, err := labels.NewRequirement(names.LabelPlaceholder, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key: cannot fail
	}
	return map[client.Object]cache.ByObject{
		&corev1.Service{}: {
			Namespaces: map[string]cache.Config{o.PlaceholderNamespace: {}},
			Label:      labels.NewSelector().Add(*isPlaceholder),
			Transform:  servicecache.Trim,
		},
		&corev1.Event{}: {
			Namespaces: map[string]cache.Config{o.PlaceholderNamespace: {}},
			Field:      fields.OneTermEqualSelector("reason", MetalLBAllocationFailed),
		},
	}
}

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
//
// Clearing a stale allocation of a free address (stale.go) reads MetalLB's
// IPAllocated Events in every namespace, and creates and deletes a
// headless Service where the Service MetalLB still books the address for
// no longer exists; it never touches a Service that exists. These reads
// go to the API server, not the cache.
// +kubebuilder:rbac:groups="",resources=events,verbs=list
// +kubebuilder:rbac:groups="",resources=services,verbs=get;create;delete
//
// Placeholders and MetalLB's Events about them live in the placeholder
// namespace, and the cache (CacheOptions) watches Services and Events only
// there: a Role in that namespace grants it. The namespace below is the
// default one; the chart renders the Role in the configured namespace.
// +kubebuilder:rbac:groups="",namespace=metallb-iad-system,resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",namespace=metallb-iad-system,resources=events,verbs=list;watch

// Reconcile provisions the families a claim still misses. Each pass
// re-derives what to do from the cluster: the claim, its class, the
// addresses bound to it and its allocation placeholders.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &iadv1alpha1.IPAddressClaim{}
	if err := r.Get(ctx, req.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			r.reported.ForgetPrefix(reportKey(req.Namespace, req.Name))
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if claim.DeletionTimestamp == nil {
		want := ""
		if served(claim) {
			want = className(claim)
		}
		if err := r.dropRetargeted(ctx, claim, want); err != nil {
			return patch.OnConflict(ctx, conflictRetry, ctrl.Result{}, err)
		}
	}
	if !served(claim) {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	s, err := r.newScope(ctx, claim)
	if err != nil || s == nil {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, err
	}

	var errs []error
	pending := false
	for _, f := range claim.Spec.Family.Families() {
		bound, err := r.reconcileFamily(ctx, s, f)
		if err != nil {
			errs = append(errs, err)
		}
		pending = pending || !bound
	}
	r.pending.set(req.NamespacedName, s.class.Name, pending)
	r.blocked.set(req.NamespacedName, s.class.Name, pending && s.blockedOnClass())
	res, err := patch.OnConflict(ctx, conflictRetry, ctrl.Result{}, errs...)
	if err == nil && s.waitForCore && res.RequeueAfter == 0 {
		// The core may bind the Available address to another claim;
		// look again then.
		res.RequeueAfter = coreWait
	}
	if err == nil && s.waitForRoom && res.RequeueAfter == 0 {
		// Room frees when an address goes (the address watch) or when
		// another claim's waiting placeholder goes, which nothing maps
		// here; this is the fallback.
		res.RequeueAfter = roomWait
	}
	if err == nil && s.paused > 0 {
		// Nothing else brings the claim back when its pause is over.
		res = patch.Sooner(res, ctrl.Result{RequeueAfter: s.paused})
	}
	if err == nil && s.recheck > 0 {
		// MetalLB refused the placeholder while the ledger shows room:
		// nothing in the API changes while its books are stale.
		res = patch.Sooner(res, ctrl.Result{RequeueAfter: s.recheck})
	}
	if err == nil && s.waitForLedger {
		// The address watch brings the claim back when the unheld address
		// changes; this is the fallback.
		res = patch.Sooner(res, ctrl.Result{RequeueAfter: ledgerWait})
	}
	return res, err
}

// ledgerWait is how long a claim waiting for an address of the ledger to be
// held again waits at most before the driver looks again.
const ledgerWait = 5 * time.Second

// roomWait is how long a claim of a class the ledger shows full waits at
// most before the driver looks again.
const roomWait = 30 * time.Second

// coreWait is how long a claim left to the core (an Available address could
// serve it) waits before the driver looks again.
const coreWait = 5 * time.Second

// SetupWithManager registers the cache indexes the controllers use, the
// claim controller and the placeholder garbage collector.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.Default(mgr, EventSource)
	r.blocked.quiet = true
	opts := r.Options
	if opts.MaxConcurrentReconciles == 0 {
		opts.MaxConcurrentReconciles = claimWorkers
	}
	if err := index.Register(context.Background(), mgr,
		index.AddressByClaim, index.AddressByClass, index.AddressByIP, index.PlaceholderByAddress, index.PlaceholderByClaimUID, index.PlaceholderDrawnByClass,
		index.ClaimByClass, index.EventByInvolvedUID, index.WarmPlaceholderByClass, index.WarmAddressByClass,
	); err != nil {
		return err
	}

	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&iadv1alpha1.IPAddressClaim{}, builder.WithPredicates(stampedForUs())).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.placeholderToClaim)).
		Watches(&iadv1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(r.addressToClaims)).
		Watches(&corev1.Event{}, handler.EnqueueRequestsFromMapFunc(r.eventToClaim)).
		Watches(&iadv1alpha1.IPAddressClass{}, handler.EnqueueRequestsFromMapFunc(r.classToClaims)).
		WithOptions(opts).
		Complete(r)
	if err != nil {
		return err
	}

	gc := &placeholderGC{Deps: r.Deps}
	if err := gc.setupWithManager(mgr, r.Options); err != nil {
		return err
	}
	w := &warmer{Deps: r.Deps, draws: &r.draws, cleared: &r.cleared}
	return w.setupWithManager(mgr, r.Options)
}

// stampedForUs lets through claims carrying this driver's provisioner stamp,
// before or after the change (so a claim leaving the driver is seen once).
func stampedForUs() predicate.Funcs {
	ours := func(o client.Object) bool {
		return o != nil && o.GetAnnotations()[iadv1alpha1.ProvisionerAnnotation] == names.Provisioner
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return ours(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return ours(e.ObjectOld) || ours(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return ours(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return ours(e.Object) },
	}
}

// claimOfPlaceholder is the claim a placeholder's annotations name.
func claimOfPlaceholder(o client.Object) (types.NamespacedName, bool) {
	ns, name := o.GetAnnotations()[names.AnnotationClaimNamespace], o.GetAnnotations()[names.AnnotationClaimName]
	if ns == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// placeholderToClaim maps a placeholder Service to the claim it serves.
func (r *Reconciler) placeholderToClaim(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != r.PlaceholderNamespace {
		return nil
	}
	if key, ok := claimOfPlaceholder(o); ok {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return nil
}

// forget drops a claim that is gone or no longer served from the pending
// and blocked sets.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.pending.forget(key)
	r.blocked.forget(key)
}

// addressToClaims maps an IPAddress to the claim its claimRef names, to the
// claims of the placeholders labelled with its name (a claim stopped by a
// LedgerMismatch resumes when the conflicting address goes away), and to
// the claims of its class blocked on the class's ledger (a claim waiting
// for the address to be held again, to go, or for room, resumes when it
// is; scope.blockedOnClass). Claims waiting for MetalLB are not woken: on
// a class with many claims in flight, waking every pending claim on every
// address change made the claim controller's work grow with the square
// of the burst.
func (r *Reconciler) addressToClaims(ctx context.Context, o client.Object) []reconcile.Request {
	a := o.(*iadv1alpha1.IPAddress)
	seen := map[types.NamespacedName]bool{}
	if ref := a.Spec.ClaimRef; ref != nil {
		seen[types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}] = true
	}
	for _, c := range r.blocked.of(a.Spec.ClassName) {
		seen[c] = true
	}
	var phs corev1.ServiceList
	if err := r.List(ctx, &phs, client.InNamespace(r.PlaceholderNamespace),
		client.MatchingFields{index.PlaceholderByAddress: a.Name}); err != nil {
		log.FromContext(ctx).Error(err, "cannot look up placeholders by address", "ipaddress", a.Name)
	}
	for i := range phs.Items {
		if key, ok := claimOfPlaceholder(&phs.Items[i]); ok {
			seen[key] = true
		}
	}
	out := make([]reconcile.Request, 0, len(seen))
	for k := range seen {
		out = append(out, reconcile.Request{NamespacedName: k})
	}
	return out
}

// eventToClaim maps MetalLB's AllocationFailed Event on a placeholder to
// the placeholder's claim.
func (r *Reconciler) eventToClaim(ctx context.Context, o client.Object) []reconcile.Request {
	ph := eventPlaceholder(ctx, r, r.PlaceholderNamespace, o)
	if ph == nil {
		return nil
	}
	return r.placeholderToClaim(ctx, ph)
}

// eventPlaceholder is the placeholder, read from the cache, that an Event
// of MetalLB's (o) is about; nil when the Event is about another object, or
// the placeholder is gone (nothing to report on then).
func eventPlaceholder(ctx context.Context, c client.Reader, placeholderNS string, o client.Object) *corev1.Service {
	ev := o.(*corev1.Event)
	if ev.InvolvedObject.Kind != "Service" || ev.InvolvedObject.Namespace != placeholderNS {
		return nil
	}
	ph := &corev1.Service{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ev.InvolvedObject.Namespace, Name: ev.InvolvedObject.Name}, ph); err != nil {
		return nil
	}
	return ph
}

// classToClaims maps a class to the claims the core resolved to it, so a
// class that appears or changes provisioner is acted on.
func (r *Reconciler) classToClaims(ctx context.Context, o client.Object) []reconcile.Request {
	var claims iadv1alpha1.IPAddressClaimList
	if err := r.List(ctx, &claims, client.MatchingFields{index.ClaimByClass: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "cannot look up claims by class", "class", o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(claims.Items))
	for i := range claims.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&claims.Items[i])})
	}
	return out
}
