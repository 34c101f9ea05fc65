package core

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/index"
)

// conflictRetry is how soon a pass whose object vanished under it runs
// again, re-reading everything.
const conflictRetry = 100 * time.Millisecond

// claimReconciler binds claims to addresses and reports their status.
type claimReconciler struct {
	client.Client
	// binding holds the addresses a pass of another worker is binding at
	// this moment (name → the claim's uid), so that claims created at once
	// each take the smallest address nobody is taking, rather than all
	// racing for the same one and all but one re-listing after the
	// conflict.
	binding sync.Map
}

// claimWorkers is how many claims the core reconciles at once.
const claimWorkers = 4

// Reconcile runs one claim pass, re-derived from the cluster.
func (r *claimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &iadv1alpha1.IPAddressClaim{}
	if err := r.Get(ctx, req.NamespacedName, claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	collected, err := r.collect(ctx, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	if claim.DeletionTimestamp != nil {
		return quiet(r.finalize(ctx, claim, collected))
	}
	// The class is resolved before the finalizer is ensured so that both
	// metadata steps (the finalizer, then the provisioner stamp) are one
	// patch when a new claim needs both.
	var res *resolution
	missing := missingFamilies(claim.Spec.Family, collected)
	if len(missing) > 0 {
		if res, err = r.resolve(ctx, claim); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.ensureMetadata(ctx, claim, res); err != nil {
		return quiet(err)
	}
	if err := r.fillUIDs(ctx, claim, collected); err != nil {
		return quiet(err)
	}
	if res != nil && res.Class != nil {
		bound, err := r.bind(ctx, claim, res.Class.Name, missing)
		if err != nil {
			return quiet(err)
		}
		collected = append(collected, bound...)
	}
	return quiet(r.writeStatus(ctx, claim, claimStatus(claim, collected, res)))
}

// quiet turns an object that vanished under us into a prompt, silent
// retry. A lost optimistic-concurrency race is returned as the error it is:
// like the real core, the reference core then waits out the workqueue's
// exponential backoff instead of retrying at once.
func quiet(err error) (ctrl.Result, error) {
	if apierrors.IsNotFound(err) {
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return ctrl.Result{}, err
}

// collect returns the addresses bound to the claim: claimRef names it, the
// uid is empty or the claim's, and the address is not being deleted.
func (r *claimReconciler) collect(ctx context.Context, claim *iadv1alpha1.IPAddressClaim) ([]iadv1alpha1.IPAddress, error) {
	var list iadv1alpha1.IPAddressList
	if err := r.List(ctx, &list, client.MatchingFields{index.AddressByClaim: index.Key(claim.Namespace, claim.Name)}); err != nil {
		return nil, err
	}
	var out []iadv1alpha1.IPAddress
	for i := range list.Items {
		if collected(&list.Items[i], claim) {
			out = append(out, list.Items[i])
		}
	}
	return out, nil
}

// finalize reclaims every bound address by its own reclaim policy, then
// lets the claim go.
func (r *claimReconciler) finalize(ctx context.Context, claim *iadv1alpha1.IPAddressClaim, collected []iadv1alpha1.IPAddress) error {
	if !controllerutil.ContainsFinalizer(claim, iadv1alpha1.ClaimProtectionFinalizer) {
		return nil
	}
	for i := range collected {
		if err := reclaim(ctx, r.Client, &collected[i]); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(claim, iadv1alpha1.ClaimProtectionFinalizer)
	return r.Update(ctx, claim)
}

// ensureMetadata adds the claim-protection finalizer and, when the claim
// still misses a family and its class resolved, stamps the class's
// provisioner (it follows the class if the claim is retargeted before
// binding): one patch for whatever of the two is missing.
func (r *claimReconciler) ensureMetadata(ctx context.Context, claim *iadv1alpha1.IPAddressClaim, res *resolution) error {
	stamp := ""
	if res != nil && res.Class != nil && claim.Annotations[iadv1alpha1.ProvisionerAnnotation] != res.Class.Spec.Provisioner {
		stamp = res.Class.Spec.Provisioner
	}
	if controllerutil.ContainsFinalizer(claim, iadv1alpha1.ClaimProtectionFinalizer) && stamp == "" {
		return nil
	}
	controllerutil.AddFinalizer(claim, iadv1alpha1.ClaimProtectionFinalizer)
	if stamp != "" {
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		claim.Annotations[iadv1alpha1.ProvisionerAnnotation] = stamp
	}
	return r.Update(ctx, claim)
}

// fillUIDs accepts pre-bound addresses by writing the claim's uid into
// their claimRef.
func (r *claimReconciler) fillUIDs(ctx context.Context, claim *iadv1alpha1.IPAddressClaim, collected []iadv1alpha1.IPAddress) error {
	for i := range collected {
		a := &collected[i]
		if a.Spec.ClaimRef.UID != "" {
			continue
		}
		a.Spec.ClaimRef.UID = string(claim.UID)
		if err := r.Update(ctx, a); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("accepted pre-bound address", "address", a.Name)
	}
	return nil
}

// resolve resolves the claim's class from the cached classes (a short,
// cluster-scoped list).
func (r *claimReconciler) resolve(ctx context.Context, claim *iadv1alpha1.IPAddressClaim) (*resolution, error) {
	var classes iadv1alpha1.IPAddressClassList
	if err := r.List(ctx, &classes); err != nil {
		return nil, err
	}
	res := resolveClass(claim, classes.Items)
	return &res, nil
}

// bind binds, per missing family, the smallest-named candidate by writing
// its claimRef under an optimistic lock, and returns what it bound. No
// candidate: the family waits for the driver.
func (r *claimReconciler) bind(ctx context.Context, claim *iadv1alpha1.IPAddressClaim, class string, missing []iadv1alpha1.IPFamily) ([]iadv1alpha1.IPAddress, error) {
	candidates, err := r.candidates(ctx, claim, class)
	if err != nil {
		return nil, err
	}
	var bound []iadv1alpha1.IPAddress
	for _, f := range missing {
		a := r.take(claim, f, class, candidates)
		if a == nil {
			continue
		}
		err := r.bindOne(ctx, claim, a)
		r.binding.Delete(a.Name)
		if err != nil {
			return nil, err
		}
		bound = append(bound, *a)
	}
	return bound, nil
}

// take picks the smallest candidate for family that no other pass is
// binding and marks it as being bound by claim.
func (r *claimReconciler) take(claim *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily, class string, candidates []iadv1alpha1.IPAddress) *iadv1alpha1.IPAddress {
	own := false
	for {
		a := pickCandidate(claim, f, class, candidates)
		if a == nil {
			return nil
		}
		if _, taken := r.binding.LoadOrStore(a.Name, claim.UID); !taken {
			return a
		}
		if !own { // the caller's list serves its other families
			candidates, own = slices.Clone(candidates), true
		}
		name := a.Name
		candidates = slices.DeleteFunc(candidates, func(c iadv1alpha1.IPAddress) bool { return c.Name == name })
	}
}

// bindOne writes claim into a's claimRef under an optimistic lock and waits
// until the cache shows it.
func (r *claimReconciler) bindOne(ctx context.Context, claim *iadv1alpha1.IPAddressClaim, a *iadv1alpha1.IPAddress) error {
	a.Spec.ClaimRef = &iadv1alpha1.ClaimReference{Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID)}
	if err := r.Update(ctx, a); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("bound address", "address", a.Name, "ip", a.Spec.Address)
	r.waitForCache(ctx, a)
	return nil
}

// candidates returns the address named by spec.addressName, or every address
// of the class.
func (r *claimReconciler) candidates(ctx context.Context, claim *iadv1alpha1.IPAddressClaim, class string) ([]iadv1alpha1.IPAddress, error) {
	if claim.Spec.AddressName != "" {
		a := &iadv1alpha1.IPAddress{}
		err := r.Get(ctx, types.NamespacedName{Name: claim.Spec.AddressName}, a)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []iadv1alpha1.IPAddress{*a}, nil
	}
	var list iadv1alpha1.IPAddressList
	if err := r.List(ctx, &list, client.MatchingFields{index.AddressByClass: class}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// waitForCache waits, briefly, until the cache shows a binding just
// written, so the next pass cannot bind a second address for the same
// family from a stale read. On timeout the next pass simply re-reads.
func (r *claimReconciler) waitForCache(ctx context.Context, a *iadv1alpha1.IPAddress) {
	_ = wait.PollUntilContextTimeout(ctx, 2*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		cur := &iadv1alpha1.IPAddress{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
			return false, nil
		}
		return cur.Spec.ClaimRef != nil && cur.Spec.ClaimRef.UID == a.Spec.ClaimRef.UID, nil
	})
}

// writeStatus writes the claim's whole status when it changed, as a
// full-object update like the real core's: a pass that read a stale claim
// from the cache fails on its resourceVersion and never overwrites a newer
// status.
func (r *claimReconciler) writeStatus(ctx context.Context, claim *iadv1alpha1.IPAddressClaim, st iadv1alpha1.IPAddressClaimStatus) error {
	if equality.Semantic.DeepEqual(claim.Status, st) {
		return nil
	}
	claim.Status = st
	return r.Status().Update(ctx, claim)
}
