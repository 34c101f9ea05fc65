// Package warm is the claim binary's warm controller: it keeps a class's
// warm addresses allocated ahead of claims, drawing them through the
// pipeline it shares with the claim controller (controllers/claim/draw).
package warm

import (
	"context"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/queue"
)

// WarmControllerName is the name of the controller that keeps a class's
// warm reservations filled.
const WarmControllerName = "claim-warm"

// warmer keeps, for every served class with spec.parameters.warmAddresses
// set, that many Available IPAddresses of each family the class has ranges
// of: drawn as claims' addresses are (draw.go), but recorded with no
// claimRef, so the core binds a new claim to one at once.
type warmer struct {
	bootstrap.Deps
	// pauses holds, per class and family, the pause after a warm
	// placeholder gave an address back: MetalLB hands the next one the
	// same address while its owner waits for it.
	pauses draw.Pauses
	// refills holds back a refill while a burst of claims is still taking
	// the class's warm addresses (refillQuiet).
	refills draw.RefillDelays
	// shared is the claim controller's: it draws under it too.
	shared *draw.Shared
	// drawSeq names the warm draws in the class's book.
	drawSeq atomic.Uint64
}

// warmKey names one family of one class in pauses and refills.
func warmKey(className string, f iadv1alpha1.IPFamily) string {
	return className + "/" + string(f)
}

// warmFamilies are the families a class keeps warm addresses of, in the
// order a pass fills them.
var warmFamilies = []iadv1alpha1.IPFamily{iadv1alpha1.FamilyIPv4, iadv1alpha1.FamilyIPv6}

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=get;list;watch;create;delete

// Reconcile tops up or trims one class's warm addresses, one family at a
// time, or drops them when the class is no longer served; a class with
// nothing warm to keep or drop ends there (checkIdle). Under the class's
// draw lock it reads the ledger and decides each family's plan, entering
// the draws it will make in the class's book (decideFills); the API calls
// come after, outside the lock, as a claim's do (fill, clearRefused).
func (w *warmer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &iadv1alpha1.IPAddressClass{}
	if err := w.Get(ctx, req.NamespacedName, c); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		c = nil
	}
	s := &warmScope{class: c, name: req.Name, fills: map[iadv1alpha1.IPFamily]*warmFill{}}
	s.target, s.ranges, s.served = warmTarget(c)
	// The draws entered in the book and not made, whatever ends the pass,
	// leave the book with it.
	defer s.settle()
	if !s.served {
		return phase.Run(ctx, s, phase.Of(w.checkIdle), phase.Of(w.readLedger), phase.Of(w.dropOrphans))
	}
	phases := []phase.Phase[*warmScope]{phase.Of(w.checkIdle), phase.Of(w.decideFills)}
	for _, f := range warmFamilies {
		phases = append(phases, w.fill(f), w.clearRefused(f))
	}
	return phase.Run(ctx, s, phases...)
}

// keepsWarm tells whether the cached class of that name asks for warm
// addresses.
func (w *warmer) keepsWarm(ctx context.Context, className string) bool {
	c := &iadv1alpha1.IPAddressClass{}
	if err := w.Get(ctx, types.NamespacedName{Name: className}, c); err != nil {
		return false // gone: its warm leftovers still map to it
	}
	target, _, _ := warmTarget(c)
	return target > 0
}

// warmPlaceholders lists the warm placeholders of a class that are not
// handed over yet.
func (w *warmer) warmPlaceholders(ctx context.Context, className string) ([]*corev1.Service, error) {
	var list corev1.ServiceList
	if err := w.List(ctx, &list, client.InNamespace(w.PlaceholderNamespace),
		client.MatchingFields{index.WarmPlaceholderByClass: className}); err != nil {
		return nil, err
	}
	out := make([]*corev1.Service, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// SetupWithManager runs the warm controller on mgr with d, the claim
// controller's dependencies and options, drawing under what the claim
// controller shares (draw.Shared).
func SetupWithManager(mgr ctrl.Manager, d bootstrap.Deps, opts controller.Options, shared *draw.Shared) error {
	w := &warmer{Deps: d, shared: shared}
	return w.setupWithManager(mgr, opts)
}

func (w *warmer) setupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	// An address or placeholder concerns the warm controller when it is
	// warm itself (a leftover to drop or one to count), or when its class
	// keeps warm addresses (its draws change what is free to fill from).
	// Other classes' claims, every claim of a class without warm
	// addresses, never wake it: 6.7 idle passes per claim before.
	toClass := func(ctx context.Context, o client.Object) []reconcile.Request {
		name, warm := warmClassOf(o, w.PlaceholderNamespace)
		if name == "" || !warm && !w.keepsWarm(ctx, name) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
	}
	// MetalLB refusing a warm placeholder changes nothing on the Service,
	// only an Event: the class looks at the refusal then (clearRefused).
	refusal := func(ctx context.Context, o client.Object) []reconcile.Request {
		ph := draw.EventPlaceholder(ctx, w, w.PlaceholderNamespace, o)
		if ph == nil || ph.Labels[marks.LabelPlaceholder] != names.PlaceholderWarm {
			return nil
		}
		return toClass(ctx, ph)
	}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.(*iadv1alpha1.IPAddressClass).Spec.Provisioner == names.Provisioner
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(WarmControllerName).
		For(&iadv1alpha1.IPAddressClass{}, builder.WithPredicates(ours)).
		Watches(&iadv1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(toClass)).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(toClass)).
		Watches(&corev1.Event{}, handler.EnqueueRequestsFromMapFunc(refusal)).
		WithOptions(queue.WithQueue(opts)).
		Complete(w)
}
