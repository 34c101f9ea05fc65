package hold

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/metallb-iad/internal/conditions"
)

// noteHold records HoldReleased (a parked hold says so in Held alone: one
// Event a handoff, the Service's) and sets Granted and Held in memory,
// with the AddressTakenElsewhere Warning after the status patch.
func (k *Keeper) noteHold(s *Scope, v *holdView, p holdPlan, deleted int) {
	a := s.Addr
	if w := releasedFor(a, p.Pair, v.attached, deleted); w != nil {
		k.Recorder.Event(a, corev1.EventTypeNormal, ReasonHoldReleased, msgHoldReleased(w, deleted))
	}
	g := grantedWords(a.Spec.ClassName, p.Ungranted)
	conditions.Set(&a.Status.Conditions, conditions.Granted, g.Status, g.Reason, g.Message, a.Generation)
	if p.Held == nil {
		return
	}
	h := heldWords(p.Held, v.ip, a.Spec.ClassName, k.ParkingPool)
	if conditions.Set(&a.Status.Conditions, conditions.Held, h.Status, h.Reason, h.Message, a.Generation) && p.TakenBy != nil {
		s.AfterPatch = append(s.AfterPatch, Event{Object: a, Type: corev1.EventTypeWarning, Reason: ReasonAddressTakenElsewhere, Message: h.Message})
	}
}
