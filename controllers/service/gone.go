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
)

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
