// Package core is the reference core, written from the contract, for tests
// and the demo; not shipped.
//
// It runs the two reconcilers of the core's claim/address lifecycle: the
// claim reconciler ("core-claim") matches claims to IPAddresses, resolves
// classes, stamps the provisioner annotation and reports claim status; the
// address reconciler ("core-address") keeps address phases Available, Bound
// and Released and applies reclaim policies. It never writes associatedTo,
// never sets Conflict or Lost, and never touches finalizers other than its
// own two.
package core

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/index"
)

// Controller runs the reference core like one of the driver's controllers
// (bootstrap.Controller).
var Controller = bootstrap.Controller{
	Name:  "core",
	Setup: func(mgr ctrl.Manager, _ *bootstrap.Options) error { return Setup(context.Background(), mgr) },
}

// NewManager creates a manager, as the cluster admin of cfg, that runs the
// core once started.
func NewManager(cfg *rest.Config) (ctrl.Manager, error) {
	return Controller.NewManager(cfg, &bootstrap.Options{MetricsBindAddress: "0", HealthProbeBindAddress: "0"})
}

// Setup registers the core's indexes and both reconcilers on mgr.
//
// Controller name validation is skipped so that several managers in one
// process (tests that restart the core) can each run it. An index another
// controller of the same manager already registered is reused
// (index.Register is idempotent per manager).
func Setup(ctx context.Context, mgr ctrl.Manager) error {
	if err := index.Register(ctx, mgr, index.AddressByClaim, index.AddressByClass, index.ClaimByClass); err != nil {
		return err
	}
	skipNameValidation := true
	opts := controller.Options{SkipNameValidation: &skipNameValidation}

	cr := &claimReconciler{Client: mgr.GetClient()}
	claimOpts := opts
	claimOpts.MaxConcurrentReconciles = claimWorkers
	if err := ctrl.NewControllerManagedBy(mgr).Named("core-claim").
		For(&iadv1alpha1.IPAddressClaim{}).
		Watches(&iadv1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(cr.claimsForAddress)).
		Watches(&iadv1alpha1.IPAddressClass{}, handler.EnqueueRequestsFromMapFunc(cr.claimsForClass)).
		WithOptions(claimOpts).
		Complete(cr); err != nil {
		return err
	}

	ar := &addressReconciler{Client: mgr.GetClient()}
	return ctrl.NewControllerManagedBy(mgr).Named("core-address").
		For(&iadv1alpha1.IPAddress{}).
		Watches(&iadv1alpha1.IPAddressClaim{}, handler.EnqueueRequestsFromMapFunc(ar.addressesForClaim)).
		WithOptions(opts).
		Complete(ar)
}

// claimsForAddress re-queues the claim an address names (the handler calls
// it with both the old and the new object, so a cleared claimRef reaches
// the former claim), and, for an Available unbound address, the claims of
// its class that are not fully bound.
func (r *claimReconciler) claimsForAddress(ctx context.Context, o client.Object) []reconcile.Request {
	a := o.(*iadv1alpha1.IPAddress)
	if ref := a.Spec.ClaimRef; ref != nil {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}}}
	}
	if a.Status.Phase != iadv1alpha1.AddressAvailable {
		return nil
	}
	return r.unboundClaimsOfClass(ctx, a.Spec.ClassName)
}

// claimsForClass re-queues, on any change of a class, the claims resolved to
// it that are not fully bound (through the class index) and every claim
// whose class is not resolved yet. The latter is a list of all claims, which
// the reference core accepts: a claim waiting for a default class (or for a
// class it names to appear) has no class name to index by.
func (r *claimReconciler) claimsForClass(ctx context.Context, o client.Object) []reconcile.Request {
	reqs := r.unboundClaimsOfClass(ctx, o.GetName())
	var all iadv1alpha1.IPAddressClaimList
	if err := r.List(ctx, &all); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "cannot list claims for a class event")
		return reqs
	}
	for i := range all.Items {
		c := &all.Items[i]
		if !conditions.IsTrue(c.Status.Conditions, iadv1alpha1.ClaimConditionClassResolved) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return reqs
}

func (r *claimReconciler) unboundClaimsOfClass(ctx context.Context, class string) []reconcile.Request {
	var claims iadv1alpha1.IPAddressClaimList
	if err := r.List(ctx, &claims, client.MatchingFields{index.ClaimByClass: class}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "cannot list claims of a class", "class", class)
		return nil
	}
	var reqs []reconcile.Request
	for i := range claims.Items {
		if claims.Items[i].Status.Phase != iadv1alpha1.ClaimBound {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&claims.Items[i])})
		}
	}
	return reqs
}

// addressesForClaim re-queues the addresses whose claimRef names a claim, so
// they follow its binding, deletion and disappearance.
func (r *addressReconciler) addressesForClaim(ctx context.Context, o client.Object) []reconcile.Request {
	var addrs iadv1alpha1.IPAddressList
	if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClaim: index.Key(o.GetNamespace(), o.GetName())}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "cannot list addresses of a claim")
		return nil
	}
	reqs := make([]reconcile.Request, len(addrs.Items))
	for i := range addrs.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: addrs.Items[i].Name}}
	}
	return reqs
}

// reclaim applies an address's own reclaim policy once its claim is gone
// (or being deleted): Delete deletes it, Retain sets phase Released and
// keeps claimRef.
func reclaim(ctx context.Context, c client.Client, a *iadv1alpha1.IPAddress) error {
	del, release := reclaimAction(a)
	switch {
	case del:
		if a.DeletionTimestamp != nil {
			return nil
		}
		ctrl.LoggerFrom(ctx).Info("reclaim: deleting address", "address", a.Name)
		err := c.Delete(ctx, a, client.Preconditions{UID: &a.UID})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	case release:
		ctrl.LoggerFrom(ctx).Info("reclaim: releasing address", "address", a.Name)
		return setAddressPhase(ctx, c, a, iadv1alpha1.AddressReleased)
	}
	return nil
}

// setAddressPhase writes status.phase as a full-object status update from
// the cached object, as the real core does: a read older than a driver's
// write fails on its resourceVersion.
func setAddressPhase(ctx context.Context, c client.Client, a *iadv1alpha1.IPAddress, phase iadv1alpha1.IPAddressPhase) error {
	if a.Status.Phase == phase {
		return nil
	}
	a.Status.Phase = phase
	return c.Status().Update(ctx, a)
}
