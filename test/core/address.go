package core

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// addressReconciler keeps address phases and applies reclaim policies.
type addressReconciler struct {
	client.Client
}

// Reconcile runs one address pass, re-derived from the cluster.
func (r *addressReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	a := &iadv1alpha1.IPAddress{}
	if err := r.Get(ctx, req.NamespacedName, a); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if a.DeletionTimestamp != nil {
		return quiet(r.finalize(ctx, a))
	}
	if !controllerutil.ContainsFinalizer(a, iadv1alpha1.AddressProtectionFinalizer) {
		controllerutil.AddFinalizer(a, iadv1alpha1.AddressProtectionFinalizer)
		if err := r.Update(ctx, a); err != nil {
			return quiet(err)
		}
	}

	state := claimAbsent
	if ref := a.Spec.ClaimRef; ref != nil && ref.UID != "" {
		var err error
		if state, err = r.claimState(ctx, ref); err != nil {
			return ctrl.Result{}, err
		}
	}
	d := decideAddress(a, state)
	if d.Reclaim {
		return quiet(reclaim(ctx, r.Client, a))
	}
	if d.Phase != "" {
		return quiet(setAddressPhase(ctx, r.Client, a, d.Phase))
	}
	return ctrl.Result{}, nil
}

// finalize drops address-protection unless a live claim still holds the
// address.
func (r *addressReconciler) finalize(ctx context.Context, a *iadv1alpha1.IPAddress) error {
	if !controllerutil.ContainsFinalizer(a, iadv1alpha1.AddressProtectionFinalizer) {
		return nil
	}
	state := claimAbsent
	if a.Spec.ClaimRef != nil {
		var err error
		if state, err = r.claimState(ctx, a.Spec.ClaimRef); err != nil {
			return err
		}
	}
	if liveClaimHolds(a, state) {
		return nil
	}
	controllerutil.RemoveFinalizer(a, iadv1alpha1.AddressProtectionFinalizer)
	return r.Update(ctx, a)
}

// claimState looks up the claim a claimRef names in the cache, and trusts
// it, as the real core does: an address pre-bound to a claim the cache has
// not seen yet is reclaimed at once (deleted under Delete). A driver must
// create the claim, wait until the core has seen it, then the address.
func (r *addressReconciler) claimState(ctx context.Context, ref *iadv1alpha1.ClaimReference) (claimState, error) {
	c := &iadv1alpha1.IPAddressClaim{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, c)
	if apierrors.IsNotFound(err) {
		return claimAbsent, nil
	}
	if err != nil {
		return claimAbsent, err
	}
	return stateOf(c, ref.UID), nil
}
