package ipaddress

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/metallb-iad/controllers/ipaddress/hold"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// clearStaleAssociation clears associatedTo when the Service it names no
// longer exists; EnforceHold then re-arms the hold. A Service whose
// annotation changed is the Service controller's to detach.
func (r *Reconciler) clearStaleAssociation(ctx context.Context, s *scope) (phase.Result, error) {
	w := s.Addr.Status.AssociatedTo
	if w == nil || w.Kind != "Service" {
		return phase.Next(), nil
	}
	gone, err := r.serviceGone(ctx, w.Namespace, w.Name)
	if err != nil || !gone {
		return phase.Next(), err
	}
	log.FromContext(ctx).Info("clearing a stale association", "service", index.Key(w.Namespace, w.Name))
	s.AfterPatch = append(s.AfterPatch, hold.Event{Object: s.Addr, Type: corev1.EventTypeNormal, Reason: ReasonAssociationCleared, Message: msgAssociationCleared(w)})
	s.Addr.Status.AssociatedTo = nil
	return phase.Next(), nil
}

// serviceGone reports whether a Service does not exist, asking the API
// server when the cache does not have it (it may not show a new one yet).
func (r *Reconciler) serviceGone(ctx context.Context, namespace, name string) (bool, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	err := r.Get(ctx, key, &corev1.Service{})
	if err == nil || !apierrors.IsNotFound(err) {
		return false, err
	}
	err = r.APIReader.Get(ctx, key, &corev1.Service{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}
