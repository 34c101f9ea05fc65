// Package placeholdergc is the claim binary's placeholder GC: a controller
// of its own beside the claim and warm controllers.
package placeholdergc

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/placeholder"
	"github.com/cozystack/metallb-iad/internal/queue"
)

// ControllerName is the placeholder GC's name.
const ControllerName = "claim-placeholder-gc"

// Reconciler deletes orphaned allocation placeholders: those whose claim
// is gone (or was replaced by another claim of the same name) before their
// address was recorded, and which back no IPAddress. Placeholders backing
// an IPAddress belong to it and are left alone.
type Reconciler struct {
	bootstrap.Deps
}

// Reconcile looks at one placeholder Service: it deletes an orphan, judged
// from the cache, then confirmed with the API server.
func (g *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ph := &corev1.Service{}
	if err := g.Get(ctx, req.NamespacedName, ph); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return phase.Run(ctx, ph, phase.Of(g.judgeCached), phase.Of(g.confirmOrphan), phase.Of(g.deleteOrphan))
}

// judgeCached ends the pass unless the cache shows an orphaned allocation
// placeholder (isOrphan).
func (g *Reconciler) judgeCached(ctx context.Context, ph *corev1.Service) (phase.Result, error) {
	if ph.Labels[marks.LabelPlaceholder] != names.PlaceholderAllocation {
		return phase.Halt("not an allocation placeholder", 0), nil
	}
	return g.judge(ctx, g.Client, ph)
}

// confirmOrphan confirms with the API server itself that the claim is gone
// and no IPAddress is backed, not just the cache: deleting releases an
// address.
func (g *Reconciler) confirmOrphan(ctx context.Context, ph *corev1.Service) (phase.Result, error) {
	return g.judge(ctx, g.APIReader, ph)
}

// judge ends the pass unless ph is an orphan as read from r.
func (g *Reconciler) judge(ctx context.Context, r client.Reader, ph *corev1.Service) (phase.Result, error) {
	claim, addr, err := g.related(ctx, r, ph)
	switch {
	case err != nil:
		return phase.Next(), err
	case !isOrphan(ph, claim, addr):
		return phase.Halt("not an orphan", 0), nil
	}
	return phase.Next(), nil
}

// deleteOrphan deletes the orphaned placeholder, exactly as the pass read
// it. A conflict means the placeholder changed since the cache showed it
// (for example it was just handed over): the pass is looked at again.
func (g *Reconciler) deleteOrphan(ctx context.Context, ph *corev1.Service) (phase.Result, error) {
	deleted, err := patch.Delete(ctx, g.Client, ph, true)
	if err != nil {
		return phase.Next(), fmt.Errorf("delete orphaned placeholder %s: %w", ph.Name, err)
	}
	if !deleted {
		return phase.Next(), nil
	}
	log.FromContext(ctx).Info("deleted orphaned allocation placeholder: its claim is gone and it backs no IPAddress",
		"placeholder", ph.Name, "claim", index.Key(ph.Annotations[marks.AnnotationClaimNamespace], ph.Annotations[marks.AnnotationClaimName]),
		"claimUID", ph.Labels[marks.LabelClaimUID])
	return phase.Next(), nil
}

// related reads the claim a placeholder serves and the IPAddress its address
// label names, each nil when it does not exist.
func (g *Reconciler) related(ctx context.Context, r client.Reader, ph *corev1.Service) (*iadv1alpha1.IPAddressClaim, *iadv1alpha1.IPAddress, error) {
	var claim *iadv1alpha1.IPAddressClaim
	if key, ok := marks.PlaceholderClaim(ph); ok {
		c := &iadv1alpha1.IPAddressClaim{}
		switch err := r.Get(ctx, key, c); {
		case err == nil:
			claim = c
		case !apierrors.IsNotFound(err):
			return nil, nil, err
		}
	}
	var addr *iadv1alpha1.IPAddress
	if name := ph.Labels[marks.LabelAddress]; name != "" {
		a := &iadv1alpha1.IPAddress{}
		switch err := r.Get(ctx, types.NamespacedName{Name: name}, a); {
		case err == nil:
			addr = a
		case !apierrors.IsNotFound(err):
			return nil, nil, err
		}
	}
	return claim, addr, nil
}

// SetupWithManager runs the placeholder GC on mgr with d, the claim
// controller's dependencies, and its options.
func SetupWithManager(mgr ctrl.Manager, d bootstrap.Deps, opts controller.Options) error {
	return (&Reconciler{Deps: d}).setupWithManager(mgr, opts)
}

func (g *Reconciler) setupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	isAllocation := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == g.PlaceholderNamespace && o.GetLabels()[marks.LabelPlaceholder] == names.PlaceholderAllocation
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Service{}, builder.WithPredicates(isAllocation, placeholderMarked)).
		Watches(&iadv1alpha1.IPAddressClaim{}, handler.EnqueueRequestsFromMapFunc(g.claimToPlaceholders), builder.WithPredicates(claimGone)).
		Watches(&iadv1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(g.addressToPlaceholders), builder.WithPredicates(addressUnbound)).
		WithOptions(queue.WithQueue(opts)).
		Complete(g)
}

// claimToPlaceholders maps a claim that went (claimGone) to its
// allocation placeholders, named from its uid (RenderPlaceholder): one
// cached read per family, where an index by uid would keep a set per
// placeholder.
func (g *Reconciler) claimToPlaceholders(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, f := range []iadv1alpha1.IPFamily{iadv1alpha1.FamilyIPv4, iadv1alpha1.FamilyIPv6} {
		key := client.ObjectKey{Namespace: g.PlaceholderNamespace, Name: placeholder.AllocationName(o.GetUID(), string(f))}
		var ph corev1.Service
		if err := g.Get(ctx, key, &ph); err != nil {
			if !apierrors.IsNotFound(err) {
				log.FromContext(ctx).Error(err, "cannot look up the claim's placeholder", "placeholder", key)
			}
			continue
		}
		if ph.Labels[marks.LabelPlaceholder] == names.PlaceholderAllocation {
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

// addressToPlaceholders maps an IPAddress to the placeholders labelled with
// its name.
func (g *Reconciler) addressToPlaceholders(ctx context.Context, o client.Object) []reconcile.Request {
	var phs corev1.ServiceList
	if err := g.List(ctx, &phs, client.InNamespace(g.PlaceholderNamespace),
		client.MatchingFields{index.PlaceholderByAddress: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "cannot look up placeholders by address", "ipaddress", o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(phs.Items))
	for i := range phs.Items {
		if phs.Items[i].Labels[marks.LabelPlaceholder] == names.PlaceholderAllocation {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&phs.Items[i])})
		}
	}
	return out
}
