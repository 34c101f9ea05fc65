package service

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/metallb-iad/internal/changes"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// decideAssociation decides (Decide) what the attach and detach phases
// do, and records the verdict's Event once per change.
func (r *Reconciler) decideAssociation(ctx context.Context, s *scope) (phase.Result, error) {
	v := Decide(s.situation(r.LoadBalancerClass))
	s.verdict = v
	log.FromContext(ctx).V(1).Info("decided", "action", v.Action, "reason", v.Reason)
	if r.verdicts.changed(s.key, s.svc.UID, v.Reason, v.Message) && v.EventType != "" {
		r.Recorder.Event(s.svc, v.EventType, v.Reason, v.Message)
		if v.Reason == ReasonClaimAlreadyAssociated {
			r.reportOtherHolder(s)
		}
	}
	if v.Wait != "" {
		return phase.WaitFor(v.Wait, 0), nil
	}
	return phase.Next(), nil
}

// reportOtherHolder tells the address already associated elsewhere that a
// second Service asked for it.
func (r *Reconciler) reportOtherHolder(s *scope) {
	if s.otherAddress == nil {
		return
	}
	r.Recorder.Event(s.otherAddress, corev1.EventTypeWarning, ReasonClaimAlreadyAssociated,
		msgClaimAlreadyAssociatedAddress(s.svc.Namespace, s.svc.Name, s.claimName, s.otherHolder))
}

// verdicts remembers, per Service, the last verdict, so its Event is
// recorded once per change.
type verdicts struct{ memo changes.Memo }

func (v *verdicts) changed(key types.NamespacedName, uid types.UID, reason, message string) bool {
	value := ""
	if reason != "" {
		value = string(uid) + "\x00" + reason + "\x00" + message
	}
	return v.memo.Changed(key.String(), value)
}

func (v *verdicts) forget(key types.NamespacedName) { v.memo.Forget(key.String()) }
