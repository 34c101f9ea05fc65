package service

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// AssociationFinalizer is the finalizer earlier versions put on the
// Services they attached. A tenant's Service must never wait for a driver
// controller to be deleted, so it is removed wherever it is found.
const AssociationFinalizer = names.Domain + "association"

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
