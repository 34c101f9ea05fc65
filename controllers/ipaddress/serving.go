package ipaddress

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// servingVerdict is the AttachmentServed condition to set, if set, with a
// Warning when it turns False.
type servingVerdict struct {
	set     bool
	status  metav1.ConditionStatus
	reason  string
	message string
	warn    bool
}

// planServing decides AttachmentServed from the previous condition, the
// attached pinned Service's key ("" for none) and MetalLB's refusal of it
// since the attachment ("" for none).
func planServing(prev *metav1.Condition, ip, svc, refused string) servingVerdict {
	if refused != "" {
		msg := fmt.Sprintf("Attached to Service %s, which is pinned to %s but holds none of it: MetalLB refused it the address (%q). "+
			"The driver repairs what it wrote (its pin, a pool request it takes over); anything else on the Service that contradicts the pin must be removed",
			svc, ip, refused)
		return servingVerdict{set: true, status: metav1.ConditionFalse, reason: conditions.ReasonRefusedByMetalLB, message: msg,
			warn: prev == nil || prev.Status != metav1.ConditionFalse || prev.Message != msg}
	}
	if prev == nil || prev.Status == metav1.ConditionTrue {
		return servingVerdict{}
	}
	msg := "The Service the address is attached to holds it"
	if svc == "" {
		msg = "The address is not attached to a Service MetalLB refuses"
	}
	return servingVerdict{set: true, status: metav1.ConditionTrue, reason: conditions.ReasonServiceHoldsAddress, message: msg}
}

// pinnedTo reports whether the Service asks MetalLB for ip: the driver's
// pin or its owner's.
func pinnedTo(svc *corev1.Service, ip string) bool {
	if slices.Contains(names.SplitIPs(svc.Annotations[names.MetalLBLoadBalancerIPs]), ip) {
		return true
	}
	hand := binding.HandPin(svc)
	return hand != "" && slices.Contains(names.SplitIPs(hand), ip)
}

// checkServing keeps the address from saying attached while its Service
// holds none of it: AttachmentServed goes False, with Warnings, while the
// attached Service is pinned to the address without holding it and MetalLB
// refused it since the attachment (an AllocationFailed no older than Held's
// last change), and True once that is over.
func (r *Reconciler) checkServing(ctx context.Context, s *scope) (phase.Result, error) {
	a, ip := s.addr, s.ip.String()
	svc, err := r.attachedService(ctx, s)
	if err != nil {
		return phase.Next(), err
	}
	key, refused := "", ""
	if svc != nil && pinnedTo(svc, ip) {
		key = svc.Namespace + "/" + svc.Name
		if !binding.Holds(svc, ip) {
			var evs corev1.EventList
			if err := r.APIReader.List(ctx, &evs, client.InNamespace(svc.Namespace),
				client.MatchingFields{"involvedObject.name": svc.Name, "reason": metallbAllocationFailed}); err != nil {
				return phase.Next(), err
			}
			var since time.Time
			if h := meta.FindStatusCondition(a.Status.Conditions, conditions.Held); h != nil {
				since = h.LastTransitionTime.Time
			}
			if f := stale.LatestFailure(evs.Items, svc.UID); f != nil && !stale.EventTime(f).Before(since.Truncate(time.Second)) {
				refused = f.Message
			}
		}
	}
	res := phase.Next()
	if key != "" && refused == "" && !binding.Holds(svc, ip) {
		// MetalLB's Event may come after the status change that woke
		// this pass, and Events wake nothing here.
		res = phase.RetryAfter(servingRecheck, "MetalLB may not have refused the attached Service yet")
	}
	v := planServing(meta.FindStatusCondition(a.Status.Conditions, conditions.AttachmentServed), ip, key, refused)
	if !v.set {
		return res, nil
	}
	conditions.Set(&a.Status.Conditions, conditions.AttachmentServed, v.status, v.reason, v.message, a.Generation)
	if v.warn {
		log.FromContext(ctx).Info("MetalLB refused the Service the address is attached to", "service", key, "metallb", refused)
		s.afterPatch = append(s.afterPatch, pendingEvent{a, corev1.EventTypeWarning, ReasonAttachmentRefused, v.message})
		s.afterPatch = append(s.afterPatch, pendingEvent{svc, corev1.EventTypeWarning, ReasonAttachmentRefused, v.message})
	}
	return res, nil
}

// servingRecheck is how soon an attached, pinned Service that holds
// nothing and has no refusal on record is looked at again.
const servingRecheck = 10 * time.Second
