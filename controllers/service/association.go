package service

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// removeFinalizer removes AssociationFinalizer wherever it is found (with
// an optimistic lock: a merge patch replaces the whole list). The pass
// ends when the Service went with it.
func (r *Reconciler) removeFinalizer(ctx context.Context, s *scope) (phase.Result, error) {
	svc := s.svc
	removed, err := patch.RemoveFinalizer(ctx, r, svc, AssociationFinalizer)
	switch {
	case apierrors.IsNotFound(err):
		return phase.Halt("the Service is gone", 0), nil
	case err != nil || !removed:
		return phase.Next(), err
	}
	log.FromContext(ctx).Info("removed the association finalizer of an earlier version")
	if svc.DeletionTimestamp != nil && len(svc.Finalizers) == 0 {
		return phase.Halt("the Service went with the finalizer", 0), nil
	}
	return phase.Next(), nil
}

// decideAssociation decides (Decide), records the verdict's Event once per
// change, and runs the action.
func (r *Reconciler) decideAssociation(ctx context.Context, s *scope) (phase.Result, error) {
	v := Decide(s.situation())
	log.FromContext(ctx).V(1).Info("decided", "action", v.Action, "reason", v.Reason)
	if r.verdicts.changed(s.key, s.svc.UID, v.Reason, v.Message) && v.EventType != "" {
		r.Recorder.Event(s.svc, v.EventType, v.Reason, v.Message)
		if v.Reason == ReasonClaimAlreadyAssociated {
			r.reportOtherHolder(s)
		}
	}
	switch v.Action {
	case Associate:
		return phase.Next(), r.associate(ctx, s)
	case Detach:
		r.handoffs.forget(s.key)
		_, err := r.detachAll(ctx, s)
		return phase.Next(), err
	}
	return phase.Next(), nil
}

// reportOtherHolder tells the address already associated elsewhere that a
// second Service asked for it.
func (r *Reconciler) reportOtherHolder(s *scope) {
	if s.otherAddress == nil {
		return
	}
	r.Recorder.Eventf(s.otherAddress, corev1.EventTypeWarning, ReasonClaimAlreadyAssociated,
		"Service %s/%s asks for claim %q, whose address is already attached to Service %s; it gets no pin",
		s.svc.Namespace, s.svc.Name, s.claimName, s.otherHolder)
}

// forget handles a Service gone from the cache: the controller drops what
// it remembers of it and, once the API server confirms it is gone, clears
// the associations that still name it.
func (r *Reconciler) forget(ctx context.Context, key types.NamespacedName) error {
	r.verdicts.forget(key)
	r.imports.forget(key)
	r.handoffs.forget(key)
	r.holders.set(key, nil)
	var mine iadv1alpha1.IPAddressList
	if err := r.List(ctx, &mine, client.MatchingFields{index.AddressByAssociation: index.Key(key.Namespace, key.Name)}); err != nil {
		return err
	}
	if len(mine.Items) == 0 {
		return nil
	}
	err := r.APIReader.Get(ctx, key, &corev1.Service{})
	if err == nil {
		return nil // only the cache lags; the Service's own event follows
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	for i := range mine.Items {
		a := &mine.Items[i]
		if err := patch.Status(ctx, r, a, func() { a.Status.AssociatedTo = nil }); err != nil {
			return err
		}
		log.FromContext(ctx).Info("detached address of a deleted Service", "address", a.Name)
		r.Recorder.Eventf(a, corev1.EventTypeNormal, ReasonDetached,
			"Detached from Service %s/%s, which was deleted; the address stays reserved for its claim", key.Namespace, key.Name)
	}
	return nil
}
