package service

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/patch"
)

// detectConflicts looks every IP of the Service's load-balancer ingress up
// in the ledger. An address of one of our classes whose binding does not
// authorize the Service goes to phase Conflict, with condition Conflict and
// Events on both objects naming each other. An IP of one of our classes'
// ranges that no IPAddress records was taken from the class pool without a
// claim. Both are unauthorized holdings of the class: counted in
// metallb_iad_unauthorized_holders and reported once each with an
// UnclaimedAddress Warning on the Service and on the class. Placeholders in
// the placeholder namespace are exempt; IPs outside our classes' ranges are
// not our business.
func (r *Reconciler) detectConflicts(ctx context.Context, s *scope) error {
	svc := s.svc
	if svc.DeletionTimestamp != nil || binding.Exempt(svc, r.PlaceholderNamespace) {
		r.holders.set(s.key, nil)
		return nil
	}
	var grabs []grab
	var classes []classRanges
	for _, ip := range binding.IngressIPs(svc) {
		var hits iadv1alpha1.IPAddressList
		if err := r.List(ctx, &hits, client.MatchingFields{index.AddressByIP: ip}); err != nil {
			return err
		}
		recorded := false
		for i := range hits.Items {
			a := &hits.Items[i]
			ours, err := r.served(ctx, a)
			if err != nil {
				return err
			}
			if !ours {
				continue
			}
			recorded = true
			// An address being deleted is leaving the ledger: its
			// teardown takes it back from whoever holds it.
			// A Lost address is outside its class's pool: whoever holds the
			// IP got it from another pool, and the IPAddress controller,
			// which owns Lost, reports it until the range returns.
			if a.DeletionTimestamp != nil || Authorized(svc, a) || a.Status.Phase == iadv1alpha1.AddressLost {
				continue
			}
			grabs = append(grabs, grab{Class: a.Spec.ClassName, IP: ip, Address: a.Name})
			if err := r.markConflict(ctx, svc, a, ip); err != nil {
				return err
			}
		}
		if recorded {
			continue
		}
		if classes == nil {
			var err error
			if classes, err = r.servedClassRanges(ctx); err != nil {
				return err
			}
		}
		if c := classOfIP(classes, ip); c != "" {
			grabs = append(grabs, grab{Class: c, IP: ip})
		}
	}
	r.reportUnauthorized(ctx, svc, grabs)
	return nil
}

// markConflict sets phase Conflict and condition Conflict on an address held
// by an unauthorized Service, and records Events on both. An address already
// in Conflict over some Service is left as it is.
func (r *Reconciler) markConflict(ctx context.Context, svc *corev1.Service, a *iadv1alpha1.IPAddress, ip string) error {
	if a.Status.Phase == iadv1alpha1.AddressConflict && conditions.IsTrue(a.Status.Conditions, conditions.Conflict) {
		return nil
	}
	if err := patch.Status(ctx, r, a, func() {
		a.Status.Phase = iadv1alpha1.AddressConflict
		conditions.Set(&a.Status.Conditions, conditions.Conflict, metav1.ConditionTrue,
			conditions.ReasonUnauthorizedHolder, conflictMessage(svc, ip), a.Generation)
	}); err != nil {
		return err
	}
	log.FromContext(ctx).Info("address conflict", "address", a.Name, "ip", ip)
	binding := "no claim"
	if ref := a.Spec.ClaimRef; ref != nil {
		binding = "claim " + ref.Namespace + "/" + ref.Name
	}
	r.Recorder.Eventf(svc, corev1.EventTypeWarning, ReasonAddressConflict,
		"Service holds %s, which is IPAddress %s (bound to %s), without that binding authorizing it; remove its pin to %s",
		ip, a.Name, binding, ip)
	r.Recorder.Eventf(a, corev1.EventTypeWarning, ReasonAddressConflict,
		"Service %s/%s holds %s in MetalLB without this address's binding authorizing it", svc.Namespace, svc.Name, ip)
	return nil
}
