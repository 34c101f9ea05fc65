package class

import (
	"context"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// retain is the phase of a class that is gone (or not this driver's): it
// forgets the class's metrics and reports, and keeps what was rendered
// for it: the pool, narrowed to the addresses still recorded under the
// class name (planRetain), with a note saying so, and the advertisement as
// it is. Once no such address is left, both are withdrawn. An address
// being deleted still counts: its teardown takes it back from whoever
// holds it.
func (r *Reconciler) retain(ctx context.Context, s *scope) (phase.Result, error) {
	class := s.name
	r.forgetClass(class)
	var addrs iadv1alpha1.IPAddressList
	if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClass: class}); err != nil {
		return phase.Next(), err
	}
	pool := &metallbv1beta1.IPAddressPool{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: r.MetalLBNamespace, Name: names.PoolName(class)}, pool); {
	case kerrors.IsNotFound(err):
		pool = nil
	case err != nil:
		return phase.Next(), err
	case !controlledByClass(pool, class):
		pool = nil // someone else's object of that name
	}
	narrowed, withdraw := planRetain(class, pool, addrs.Items)
	if withdraw {
		removed, err := r.withdraw(ctx, class, nil)
		if len(removed) > 0 {
			log.FromContext(ctx).Info("withdrew what was rendered for a class that is gone; no address is recorded under its name", "removed", removed)
		}
		return phase.Next(), err
	}
	if narrowed == nil {
		return phase.Next(), nil
	}
	keep, msg := narrowed.Spec.Addresses, narrowed.Annotations[marks.KeyRetained]
	if err := patch.MetaSince(ctx, r.Client, narrowed, pool); err != nil {
		return phase.Next(), client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("class gone: kept its pool for the addresses recorded under its name", "pool", narrowed.Name, "addresses", keep)
	r.Recorder.Event(narrowed, corev1.EventTypeNormal, ReasonRetained, msg)
	return phase.Next(), nil
}
