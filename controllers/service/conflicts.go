package service

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// detectConflicts looks every ingress IP of the Service up in the ledger
// (docs/design.md, section 7). An address of a served class whose binding
// does not authorize the Service goes to phase Conflict; an IP of a served
// class's ranges that no IPAddress records was taken without a claim. Both
// are reported as unauthorized holdings (reportUnauthorized). Placeholders
// are exempt.
func (r *Reconciler) detectConflicts(ctx context.Context, s *scope) (phase.Result, error) {
	svc := s.svc
	if svc.DeletionTimestamp != nil || marks.Exempt(svc, r.PlaceholderNamespace) {
		r.holders.set(s.key, nil)
		return phase.Next(), nil
	}
	var grabs []grab
	var classes []classRanges
	for _, ip := range marks.IngressIPs(svc) {
		var hits iadv1alpha1.IPAddressList
		if err := r.List(ctx, &hits, client.MatchingFields{index.AddressByIP: ip}); err != nil {
			return phase.Next(), err
		}
		recorded := false
		for i := range hits.Items {
			a := &hits.Items[i]
			ours, err := r.served(ctx, a)
			if err != nil {
				return phase.Next(), err
			}
			if !ours {
				continue
			}
			recorded = true
			if !conflicting(svc, a) {
				continue
			}
			grabs = append(grabs, grab{Class: a.Spec.ClassName, IP: ip, Address: a.Name})
			if err := r.markConflict(ctx, svc, a, ip); err != nil {
				return phase.Next(), err
			}
		}
		if recorded {
			continue
		}
		if classes == nil {
			var err error
			if classes, err = r.servedClassRanges(ctx); err != nil {
				return phase.Next(), err
			}
		}
		if c := classOfIP(classes, ip); c != "" {
			grabs = append(grabs, grab{Class: c, IP: ip})
		}
	}
	r.reportUnauthorized(ctx, svc, grabs)
	return phase.Next(), nil
}

// conflicting reports whether svc holding a served address is a conflict.
// An address being deleted is leaving the ledger (its teardown takes it
// back); a Lost one is outside its class's pool, so its holder got the IP
// from another pool, and the IPAddress controller reports that.
func conflicting(svc *corev1.Service, a *iadv1alpha1.IPAddress) bool {
	return a.DeletionTimestamp == nil && !marks.Authorizes(a, svc) && a.Status.Phase != iadv1alpha1.AddressLost
}

// markConflict puts an address held by an unauthorized Service in phase
// Conflict, with Events on both; one already in Conflict is left as it is.
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

// conflictMessage is the Conflict condition's message.
func conflictMessage(svc *corev1.Service, ip string) string {
	return fmt.Sprintf("Service %s/%s holds %s in MetalLB without this address's binding authorizing it", svc.Namespace, svc.Name, ip)
}
