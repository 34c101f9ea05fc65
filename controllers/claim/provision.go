package claim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// loadBound scopes the addresses bound to the claim, by family, and the
// families they leave unbound.
func (r *Reconciler) loadBound(ctx context.Context, s *scope) (phase.Result, error) {
	var addrs iadv1alpha1.IPAddressList
	if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClaim: index.Key(s.claim.Namespace, s.claim.Name)}); err != nil {
		r.forget(s.key)
		return phase.Next(), err
	}
	s.bound = boundByFamily(s.claim, addrs.Items)
	for _, f := range s.claim.Spec.Family.Families() {
		s.unbound[f] = len(s.bound[f]) == 0
	}
	return phase.Next(), nil
}

// provision is the phase of family f: its next step (reconcileFamily).
func (r *Reconciler) provision(f iadv1alpha1.IPFamily) phase.Phase[*scope] {
	return phase.Phase[*scope]{Name: "provision " + string(f), Run: func(ctx context.Context, s *scope) (phase.Result, error) {
		bound, res, err := r.reconcileFamily(ctx, s, f)
		s.unbound[f] = !bound
		return res, err
	}}
}

// reconcileFamily takes the next step for one family of the claim
// (planFamily). It reports whether the family is bound when it returns.
func (r *Reconciler) reconcileFamily(ctx context.Context, s *scope, f iadv1alpha1.IPFamily) (bool, phase.Result, error) {
	ph, err := r.allocationPlaceholder(ctx, s.claim, f)
	if err != nil {
		return false, phase.Next(), err
	}
	if ph != nil && r.written.Behind(client.ObjectKeyFromObject(ph).String(), ph.ResourceVersion) {
		log.FromContext(ctx).V(1).Info("the cache has not shown this controller's last patch of the placeholder yet", "placeholder", ph.Name)
		return len(s.bound[f]) > 0, phase.WaitFor("the cache to show the last patch of the placeholder", 0), nil
	}
	st := planFamily(f, s.bound[f], ph)
	log.FromContext(ctx).V(1).Info("family", "family", f, "step", st.String())
	if st != stepWaitForMetalLB && st != stepWaitForName {
		r.report(s.claim, string(f), "", "", "") // the next wait is a change again
	}
	if st == stepNone {
		r.pauses.Forget(memoKey(s.claim, f))
	}
	switch st {
	case stepCreatePlaceholder:
		res, err := r.createPlaceholder(ctx, s, f)
		return false, res, err
	case stepWaitForMetalLB:
		res, err := r.observe(ctx, s, f, ph)
		return false, res, err
	case stepRecord:
		return r.draw(s, f).Record(ctx, ph)
	case stepHandOver:
		if a := recordedBy(f, s.bound[f], ph); a != nil {
			res, err := r.draw(s, f).HandOver(ctx, ph, a)
			return true, res, err
		}
	case stepDropSurplus:
		return true, phase.Next(), r.dropSurplus(ctx, ph)
	case stepWaitForName:
		log.FromContext(ctx).Info("the allocation placeholder's name is held for another address; waiting for it to go",
			"family", f, "placeholder", ph.Name, "ipaddress", ph.Labels[marks.LabelAddress])
		r.report(s.claim, string(f), corev1.EventTypeNormal, ReasonWaitingForName, msgWaitingForName(f, ph.Name, ph.Labels[marks.LabelAddress]))
		return false, phase.WaitFor("the hold placeholder of another address to give up the name", 0), nil
	}
	return true, phase.Next(), nil
}

// allocationPlaceholder reads the family's placeholder from the cache; nil
// when it does not exist.
func (r *Reconciler) allocationPlaceholder(ctx context.Context, claim *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily) (*corev1.Service, error) {
	ph := &corev1.Service{}
	key := types.NamespacedName{Namespace: r.PlaceholderNamespace, Name: placeholder.AllocationName(claim.UID, string(f))}
	if err := r.Get(ctx, key, ph); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return ph, nil
}

// dropSurplus deletes an allocation placeholder the claim no longer needs
// (the family was bound by another address meanwhile), releasing its
// address in MetalLB.
func (r *Reconciler) dropSurplus(ctx context.Context, ph *corev1.Service) error {
	if _, err := patch.Delete(ctx, r.Client, ph, true); err != nil {
		return fmt.Errorf("delete surplus placeholder %s: %w", ph.Name, err)
	}
	log.FromContext(ctx).Info("deleted surplus allocation placeholder: the family is bound by another address", "placeholder", ph.Name)
	return nil
}
