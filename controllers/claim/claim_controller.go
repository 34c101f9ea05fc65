package claim

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/controllers/claim/placeholdergc"
	"github.com/cozystack/metallb-iad/controllers/claim/warm"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/changes"
	"github.com/cozystack/metallb-iad/internal/compact"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/queue"
	"github.com/cozystack/metallb-iad/internal/servicecache"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// ControllerName is the claim controller's name, in logs and metrics.
const ControllerName = "claim"

// claimWorkers is how many claims are reconciled at once unless Options say
// otherwise. A pass spends most of its time waiting for the API server (a
// draw's create; a record's read, create and patch), and draws of one
// class no longer wait for each other, so a burst goes as fast as there
// are workers to wait: 16 keep a loaded API server busy.
const claimWorkers = 16

// EventSource is the component name on the Events the claim controller records.
const EventSource = "metallb-iad-claim"

// Controller runs the claim controller, in its binary and in the tests.
var Controller = bootstrap.NewController(ControllerName, CacheOptions,
	func(d bootstrap.Deps) bootstrap.Reconciler { return &Reconciler{Deps: d} })

// Reconciler is the claim controller. It reads from the API server
// (APIReader) only where a stale cache must not decide: after an
// AlreadyExists answer, and before what reserves, records or releases an
// address.
type Reconciler struct {
	bootstrap.Deps
	// Options tune the three controllers; the zero value suits production.
	Options controller.Options

	pending pendingClaims
	// blocked holds the claims waiting on their class's ledger, which the
	// address watch wakes (addressToClaims).
	blocked claimSet
	// reported and told make Events follow changes, not passes (report,
	// tell); decisions never read them.
	reported changes.Memo
	told     changes.Memo

	pauses draw.Pauses
	// written lets a pass whose cache misses this controller's last patch
	// of a placeholder wait instead of patching into a conflict.
	written patch.Written
	// shared is what the warm controller draws under too.
	shared draw.Shared
	// ledger reads the class ledgers through indexes of its own.
	ledger *draw.Ledger
}

// CacheOptions narrows the cache to what the claim controller reads:
// placeholders in the placeholder namespace, trimmed (it only patches
// them), MetalLB's AllocationFailed Events there, claims without their
// conditions and addresses with only their conditions' states (it writes
// neither, and asks only whether an address is Held).
func CacheOptions(o *bootstrap.Options) map[client.Object]cache.ByObject {
	isPlaceholder, err := labels.NewRequirement(marks.LabelPlaceholder, selection.Exists, nil)
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
			Field:      fields.OneTermEqualSelector("reason", stale.AllocationFailed),
		},
		&iadv1alpha1.IPAddressClaim{}: {Transform: compact.WithoutConditions},
		// Namespaces by their labels alone: a class may admit them by label.
		&corev1.Namespace{}:      {Transform: compact.NameAndLabels},
		&iadv1alpha1.IPAddress{}: {Transform: compact.ConditionStates},
	}
}

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
//
// The metrics endpoint asks the API server who a scraper is and whether it
// may GET /metrics (--metrics-secure).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
//
// Clearing a stale allocation of a free address (internal/stale) reads MetalLB's
// IPAllocated Events in every namespace from the API server, and creates
// and deletes a headless Service only where no Service of that name exists.
// +kubebuilder:rbac:groups="",resources=events,verbs=list
// +kubebuilder:rbac:groups="",resources=services,verbs=get;create;delete
//
// The cache watches Services and Events only in the placeholder namespace:
// a Role there grants it (the chart renders it in the configured one).
// +kubebuilder:rbac:groups="",namespace=metallb-iad-system,resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",namespace=metallb-iad-system,resources=events,verbs=list;watch

// Reconcile provisions the families a claim still misses: it drops the
// placeholders of a class the claim no longer names, ends the pass of a
// claim this driver does not serve, scopes the class and the addresses
// bound to the claim, takes one step per family, re-derived from the
// cluster, and records what the claim still waits for.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &iadv1alpha1.IPAddressClaim{}
	if err := r.Get(ctx, req.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			r.reported.ForgetPrefix(reportKey(req.Namespace, req.Name))
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &scope{key: req.NamespacedName, claim: claim, unbound: map[iadv1alpha1.IPFamily]bool{}}
	phases := []phase.Phase[*scope]{phase.Of(r.dropRetargeted), phase.Of(r.checkServed), phase.Of(r.loadClass), phase.Of(r.loadBound), phase.Of(r.checkAdmitted)}
	for _, f := range claim.Spec.Family.Families() {
		phases = append(phases, r.provision(f))
	}
	return phase.Run(ctx, s, append(phases, phase.Of(r.track))...)
}

// SetupWithManager registers the indexes and the three controllers.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.Default(mgr, EventSource)
	opts := r.Options
	if opts.MaxConcurrentReconciles == 0 {
		opts.MaxConcurrentReconciles = claimWorkers
	}
	err := index.Register(context.Background(), mgr,
		index.AddressByClaim, index.AddressByClass, index.AddressByClassNamespace, index.AddressByIP, index.PlaceholderByAddress, index.PlaceholderDrawnByClass,
		index.ClaimByClass, index.EventByInvolvedUID, index.WarmPlaceholderByClass, index.WarmAddressByClass,
	)
	if err != nil {
		return err
	}

	r.ledger, err = draw.NewLedger(context.Background(), mgr.GetCache())
	if err != nil {
		return err
	}
	phInformer, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Service{})
	if err != nil {
		return err
	}
	if _, err := phInformer.AddEventHandler(r.shared.Holds.Handler()); err != nil {
		return err
	}

	err = ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&iadv1alpha1.IPAddressClaim{}, builder.WithPredicates(stampedForUs())).
		Watches(&corev1.Service{}, r.placeholderEvents()).
		Watches(&iadv1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(r.addressToClaims)).
		Watches(&corev1.Event{}, handler.EnqueueRequestsFromMapFunc(r.eventToClaim)).
		Watches(&iadv1alpha1.IPAddressClass{}, handler.EnqueueRequestsFromMapFunc(r.classToClaims)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.namespaceToClaims), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(queue.WithQueue(opts)).
		Complete(r)
	if err != nil {
		return err
	}

	if err := placeholdergc.SetupWithManager(mgr, r.Deps, r.Options); err != nil {
		return err
	}
	return warm.SetupWithManager(mgr, r.Deps, r.Options, &r.shared)
}

// stampedForUs lets through claims stamped for this driver before or after
// the change (a claim leaving the driver is seen once).
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

// placeholderToClaim maps a placeholder Service to the claim it serves.
func (r *Reconciler) placeholderToClaim(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != r.PlaceholderNamespace {
		return nil
	}
	if key, ok := marks.PlaceholderClaim(o); ok {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return nil
}

// answeredPriority is the queue priority of a claim whose allocation
// placeholder MetalLB has answered: recording the address comes before the
// claims still to draw, which would otherwise be ahead of it in the queue.
const answeredPriority = 10

// placeholderEvents maps a placeholder's events to its claim. The first
// event of a placeholder takes its draw out of the class's book (the cache
// counts it from then on: the informer updates the cache before it tells
// its handlers); a claim whose placeholder MetalLB answered is queued
// ahead of the others, and the initial listing and resyncs behind them,
// as controller-runtime's own handlers do.
func (r *Reconciler) placeholderEvents() handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object, low bool) {
		if o.GetNamespace() != r.PlaceholderNamespace {
			return
		}
		if class := o.GetAnnotations()[marks.KeyClass]; class != "" {
			r.shared.Draws.Settle(class, o.GetName())
		}
		pq, isPQ := q.(priorityqueue.PriorityQueue[reconcile.Request])
		for _, req := range r.placeholderToClaim(ctx, o) {
			switch {
			case !isPQ:
				q.Add(req)
			case answered(o):
				pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(answeredPriority)}, req)
			case low:
				pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req)
			default:
				q.Add(req)
			}
		}
	}
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { enqueue(ctx, q, e.Object, e.IsInInitialList) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			enqueue(ctx, q, e.ObjectNew, e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion())
		},
		DeleteFunc:  func(ctx context.Context, e event.DeleteEvent, q queue) { enqueue(ctx, q, e.Object, false) },
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q queue) { enqueue(ctx, q, e.Object, false) },
	}
}

// answered reports whether o is an allocation placeholder MetalLB has
// given an address of its family: its claim's next step is recording it.
func answered(o client.Object) bool {
	ph, ok := o.(*corev1.Service)
	return ok && ph.DeletionTimestamp == nil && ph.Labels[marks.LabelPlaceholder] == names.PlaceholderAllocation &&
		draw.AssignedIP(ph, iadv1alpha1.IPFamily(ph.Annotations[marks.AnnotationFamily])) != ""
}

// addressToClaims maps an IPAddress to the claim its claimRef names, the
// claims of the placeholders labelled with its name (a LedgerMismatch
// resumes), and the claims blocked on its class's ledger. Claims waiting
// for MetalLB are not woken: that would grow with the square of a burst.
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
		client.MatchingFields{index.PlaceholderByAddress: a.Name}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "cannot look up placeholders by address", "ipaddress", a.Name)
	}
	for i := range phs.Items {
		if key, ok := marks.PlaceholderClaim(&phs.Items[i]); ok {
			seen[key] = true
		}
	}
	out := make([]reconcile.Request, 0, len(seen))
	for k := range seen {
		out = append(out, reconcile.Request{NamespacedName: k})
	}
	return out
}

// eventToClaim maps MetalLB's refusal of a placeholder to its claim.
func (r *Reconciler) eventToClaim(ctx context.Context, o client.Object) []reconcile.Request {
	ph := draw.EventPlaceholder(ctx, r, r.PlaceholderNamespace, o)
	if ph == nil {
		return nil
	}
	return r.placeholderToClaim(ctx, ph)
}

// classToClaims maps a class to the claims the core resolved to it.
func (r *Reconciler) classToClaims(ctx context.Context, o client.Object) []reconcile.Request {
	var claims iadv1alpha1.IPAddressClaimList
	if err := r.List(ctx, &claims, client.MatchingFields{index.ClaimByClass: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "cannot look up claims by class", "class", o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(claims.Items))
	for i := range claims.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&claims.Items[i])})
	}
	return out
}
