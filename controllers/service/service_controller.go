// Package service associates Services with claims, detaches them and
// detects conflicts. A tenant annotates a Service with
// local.sdn.cozystack.io/ip-address-claim; once the claim is Bound, the
// controller hands its addresses over from their hold placeholders to the
// Service, in the shared handoff where MetalLB lets the two share them
// (ShareProblem) and in the gap handoff otherwise; removing the annotation
// reverses it in the same mode (docs/design.md, section 4). It also
// imports what MetalLB assigned before the driver managed a class
// (adoptExisting) and checks that each ledger address a Service holds is
// one its binding authorizes.
package service

import (
	"context"
	"slices"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/compact"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/queue"
	"github.com/cozystack/metallb-iad/internal/servicecache"
)

// RecorderName is the component name on the controller's Events.
const RecorderName = "metallb-iad-service"

// Controller runs the service controller: its binary (bootstrap.Main) and
// the tests (Controller.NewManager) start it the same way.
var Controller = bootstrap.NewController("service", CacheOptions,
	func(d bootstrap.Deps) bootstrap.Reconciler { return &Reconciler{Deps: d} })

// CacheOptions are servicecache.Options, with claims kept without their
// conditions: the controller reads a claim's phase, never its conditions,
// and writes none.
func CacheOptions(o *bootstrap.Options) map[client.Object]cache.ByObject {
	opts := servicecache.Options(o.MetalLBNamespace)
	opts[&iadv1alpha1.IPAddressClaim{}] = cache.ByObject{Transform: compact.WithoutConditions}
	opts[&corev1.Namespace{}] = cache.ByObject{Transform: compact.NameAndLabels}
	return opts
}

// Reconciler is the service controller. It reads past the cache
// (APIReader) to confirm a Service is really gone before clearing the
// associations that name it. Its memories (handoffs for the metrics,
// holders, verdicts, imports for reporting once) decide nothing.
type Reconciler struct {
	bootstrap.Deps

	handoffs *handoffs
	stalls   stalls
	holders  *unauthorized
	verdicts verdicts
	imports  importOutcomes
}

// workers is how many Services the controller reconciles at once. Two
// Services never act on one address unseen: the attach grant and the
// association are written locked, so the second writer sees the first.
const workers = 4

// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclaims,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses/status,verbs=patch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
//
// The metrics endpoint asks the API server who a scraper is and whether it
// may GET /metrics (--metrics-secure).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
//
// The class pools, read only in MetalLB's namespace (a Role there).
// +kubebuilder:rbac:groups=metallb.io,namespace=metallb-system,resources=ipaddresspools,verbs=get;list;watch

// Reconcile runs one pass for one Service: a Service gone from the cache
// is forgotten and its associations cleared (detachGone); any other runs
// the phases below, each named after its method. Either pass ends by
// writing the status it changed, once per address (endPass).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	svc := &corev1.Service{}
	if err := r.Get(ctx, req.NamespacedName, svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.forget(req.NamespacedName)
		s := &scope{key: req.NamespacedName}
		res, err := phase.Run(ctx, s, phase.Of(r.detachGone))
		return r.endPass(ctx, s, res, err)
	}
	s := &scope{svc: svc, key: req.NamespacedName}
	res, err := phase.Run(ctx, s,
		phase.Of(r.observe),
		phase.Of(r.importFirst),
		phase.Of(r.detectConflicts),
		phase.Of(r.decideAssociation),
		phase.Of(r.chooseHandoff),
		phase.Of(r.detachStale),
		phase.Of(r.grantAttach),
		phase.Of(r.attach),
		phase.Of(r.detach),
		phase.Of(r.reportStall), // stall.go
	)
	return r.endPass(ctx, s, res, err) // report.go: the pass's status writes
}

// SetupWithManager registers the indexes the controller reads and the
// controller with its watches.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.Default(mgr, RecorderName)
	r.handoffs = newHandoffs()
	r.holders = newUnauthorized()
	if err := index.Register(context.Background(), mgr,
		index.AddressByClaim, index.AddressByIP, index.AddressByAssociation, index.AddressAttaching, index.PlaceholderByAddress,
		index.ServiceByClaim, index.ServiceByIngressIP); err != nil {
		return err
	}
	// The driver's placeholders are the other controllers' (marks.Exempt):
	// their changes reach the Services they concern through the mappers.
	notPlaceholder := predicate.NewPredicateFuncs(func(o client.Object) bool {
		svc, ok := o.(*corev1.Service)
		return !ok || !marks.Exempt(svc, r.PlaceholderNamespace)
	})
	return ctrl.NewControllerManagedBy(mgr).Named("service").
		For(&corev1.Service{}, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}, notPlaceholder)).
		Watches(&iadv1alpha1.IPAddressClaim{}, handler.EnqueueRequestsFromMapFunc(r.servicesForClaim)).
		Watches(&iadv1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(r.servicesForAddress)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.claimingServices), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.sharersOfPlaceholder)).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.waitersForPinnedClaim)).
		Watches(&iadv1alpha1.IPAddressClass{}, handler.EnqueueRequestsFromMapFunc(r.servicesForClass),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&metallbv1beta1.IPAddressPool{}, handler.EnqueueRequestsFromMapFunc(r.attachingForParking),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(r.Keys.Rotations(handler.EnqueueRequestsFromMapFunc(r.keyedServices))).
		WithOptions(queue.WithQueue(controller.Options{MaxConcurrentReconciles: workers})).
		Complete(r)
}

// keyedServices maps a rotation of the sharing key to every Service that
// carries the driver's key: each pass derives its key anew (a Service that
// shares its addresses keeps its own, marks.PairKey).
func (r *Reconciler) keyedServices(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.servicesWhere(ctx, func(svc *corev1.Service) bool {
		return marks.Of(svc).SharesOurKey() && !marks.Exempt(svc, r.PlaceholderNamespace)
	})
}

// servicesWhere lists every cached Service and requests those keep keeps:
// for the rare events that concern Services no index names.
func (r *Reconciler) servicesWhere(ctx context.Context, keep func(*corev1.Service) bool) []reconcile.Request {
	var list corev1.ServiceList
	if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "cannot list Services")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if svc := &list.Items[i]; keep(svc) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(svc)})
		}
	}
	return reqs
}

// attachingForParking maps the parking pool to the Services the attach
// grants name: parking coming or going changes their handoff (AttachMode).
func (r *Reconciler) attachingForParking(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetName() != r.ParkingPool {
		return nil
	}
	var addrs iadv1alpha1.IPAddressList
	if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressAttaching: index.Attaching}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "cannot list IPAddresses")
		return nil
	}
	var reqs []reconcile.Request
	for i := range addrs.Items {
		if svc, ok := marks.AttachingService(&addrs.Items[i]); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: svc})
		}
	}
	return reqs
}

// sharersOfPlaceholder maps a placeholder to the other Services holding
// its IPs (a shared detach waits for a placeholder to hold them again) and
// to the Service its address's attach grant names (a shared attach waits
// for the placeholder to carry the claim's key).
func (r *Reconciler) sharersOfPlaceholder(ctx context.Context, o client.Object) []reconcile.Request {
	ph, ok := o.(*corev1.Service)
	if !ok || !marks.Exempt(ph, r.PlaceholderNamespace) {
		return nil
	}
	var reqs []reconcile.Request
	if name := ph.Labels[marks.LabelAddress]; name != "" {
		a := &iadv1alpha1.IPAddress{}
		if err := r.Get(ctx, types.NamespacedName{Name: name}, a); err == nil {
			if svc, ok := marks.AttachingService(a); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: svc})
			}
			// A parked attach pins once its cache shows the hold moved away.
			if w := a.Status.AssociatedTo; w != nil && w.Kind == "Service" {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.Namespace, Name: w.Name}})
			}
		}
	}
	for _, ip := range marks.IngressIPs(ph) {
		for _, req := range r.servicesByIndex(ctx, index.ServiceByIngressIP, ip) {
			if req.Namespace != r.PlaceholderNamespace {
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}

// waitersForPinnedClaim maps a Service carrying the driver's pin for a
// claim to the other Services that name it: one waiting for its detach
// (WaitingForDetach) is woken only by the last step, which changes only
// this Service. The handler calls it with the old object too, which still
// names the claim.
func (r *Reconciler) waitersForPinnedClaim(ctx context.Context, o client.Object) []reconcile.Request {
	svc, ok := o.(*corev1.Service)
	if !ok {
		return nil
	}
	claim := marks.Of(svc).PinnedBy
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

// servicesForAddress maps an address to the Service it is associated
// with, those naming its claim and those holding its IP; with the old
// object too, so a Service it stops naming hears of it.
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
	if err := r.List(ctx, &list, client.MatchingFields{field: key}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "cannot list Services by index", "index", field, "key", key)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		// A placeholder holds the IP its address names: the controller
		// leaves placeholders alone (notPlaceholder), so they are not
		// queued either (four idle passes per claim before).
		if !marks.Exempt(&list.Items[i], r.PlaceholderNamespace) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// servicesForClass maps a class to the Services holding an address of its
// ranges, so a class created or widened after the fact reports them. It
// lists every cached Service: class changes are rare.
func (r *Reconciler) servicesForClass(ctx context.Context, o client.Object) []reconcile.Request {
	c, ok := o.(*iadv1alpha1.IPAddressClass)
	if !ok || c.Spec.Provisioner != names.Provisioner {
		return nil
	}
	p, err := classparams.ParseParameters(c.Spec.Parameters)
	if err != nil {
		return nil
	}
	classes := []classRanges{{name: c.Name, ranges: p.Addresses}}
	return r.servicesWhere(ctx, func(s *corev1.Service) bool {
		return slices.ContainsFunc(marks.IngressIPs(s), func(ip string) bool { return classOfIP(classes, ip) != "" })
	})
}

// claimingServices maps a namespace to its Services naming a claim: a
// change of its labels may admit them to their claim's class.
func (r *Reconciler) claimingServices(ctx context.Context, o client.Object) []reconcile.Request {
	var list corev1.ServiceList
	if err := r.List(ctx, &list, client.InNamespace(o.GetName()), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "cannot list the namespace's Services", "namespace", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if marks.ClaimOf(&list.Items[i]) != "" {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}
