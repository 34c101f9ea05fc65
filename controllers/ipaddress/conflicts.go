package ipaddress

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/ipaddress/hold"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// recoverConflict hands an address in phase Conflict back once no Service
// outside the placeholder namespace holds it without authority.
func (r *Reconciler) recoverConflict(ctx context.Context, s *scope) (phase.Result, error) {
	if s.Addr.Status.Phase != iadv1alpha1.AddressConflict {
		return phase.Next(), nil
	}
	if wait := conflictSettling(s.Addr, time.Now()); wait > 0 {
		return phase.RetryAfter(wait, "the conflict is settling"), nil
	}
	holders, err := r.Holders(ctx, &s.Scope)
	if err != nil {
		return phase.Next(), err
	}
	if bad := unauthorizedHolders(s.Addr, holders, r.PlaceholderNamespace); len(bad) > 0 {
		return phase.WaitFor("the Services holding the address without authority to let it go", 0), nil
	}
	b, err := r.binding(ctx, s.Addr)
	if err != nil {
		return phase.Next(), err
	}
	back := handBackPhase(b)
	log.FromContext(ctx).Info("conflict resolved", "phase", back)
	s.Addr.Status.Phase = back
	msg := msgConflictResolved(back)
	conditions.Set(&s.Addr.Status.Conditions, conditions.Conflict, metav1.ConditionFalse, conditions.ReasonResolved, msg, s.Addr.Generation)
	s.AfterPatch = append(s.AfterPatch, hold.Event{Object: s.Addr, Type: corev1.EventTypeNormal, Reason: ReasonConflictResolved, Message: msg})
	return phase.Next(), nil
}
