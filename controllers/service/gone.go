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
	"github.com/cozystack/metallb-iad/internal/phase"
)

// forget drops what the controller remembers of a Service gone from the
// cache.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.verdicts.forget(key)
	r.imports.forget(key)
	r.handoffs.forget(key)
	r.stalls.forget(key)
	r.holders.set(key, nil)
}

// detachGone is the pass of a Service gone from the cache: once the API
// server confirms it is gone, it clears the associations that still name
// it.
func (r *Reconciler) detachGone(ctx context.Context, s *scope) (phase.Result, error) {
	key := s.key
	var mine iadv1alpha1.IPAddressList
	if err := r.List(ctx, &mine, client.MatchingFields{index.AddressByAssociation: index.Key(key.Namespace, key.Name)}); err != nil {
		return phase.Next(), err
	}
	if len(mine.Items) == 0 {
		return phase.Next(), nil
	}
	err := r.APIReader.Get(ctx, key, &corev1.Service{})
	if err == nil {
		// Only the cache lags; the Service's own event follows.
		return phase.WaitFor("the cache to show the Service", 0), nil
	}
	if !apierrors.IsNotFound(err) {
		return phase.Next(), err
	}
	for i := range mine.Items {
		a := &mine.Items[i]
		// Written when the pass ends (endPass), right after this, its only
		// phase: nothing of the pass follows the clearing.
		s.status.set(a, func(st *iadv1alpha1.IPAddressStatus) { st.AssociatedTo = nil }, func() {
			log.FromContext(ctx).Info("detached address of a deleted Service", "address", a.Name)
			r.Recorder.Event(a, corev1.EventTypeNormal, ReasonDetached, msgDetachedGone(key.Namespace, key.Name))
		})
	}
	return phase.Next(), nil
}
