package ipaddress

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/metallb-iad/internal/conditions"
)

// noteHold records HoldReleased (a parked hold says so in Held alone: one
// Event a handoff, the Service's) and sets Granted and Held in memory,
// with the AddressTakenElsewhere Warning after the status patch.
func (r *Reconciler) noteHold(s *scope, v *holdView, p holdPlan, deleted int) {
	a := s.addr
	if w := releasedFor(a, p.Pair, v.attached, deleted); w != nil {
		r.Recorder.Event(a, corev1.EventTypeNormal, ReasonHoldReleased, msgHoldReleased(w, deleted))
	}
	g := grantedWords(a.Spec.ClassName, p.Ungranted)
	conditions.Set(&a.Status.Conditions, conditions.Granted, g.Status, g.Reason, g.Message, a.Generation)
	if p.Held == nil {
		return
	}
	h := heldWords(p.Held, v.ip, a.Spec.ClassName, r.ParkingPool)
	if conditions.Set(&a.Status.Conditions, conditions.Held, h.Status, h.Reason, h.Message, a.Generation) && p.TakenBy != nil {
		s.afterPatch = append(s.afterPatch, pendingEvent{a, corev1.EventTypeWarning, ReasonAddressTakenElsewhere, h.Message})
	}
}
