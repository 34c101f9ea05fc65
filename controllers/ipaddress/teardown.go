package ipaddress

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/ipaddress/hold"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// teardown is the pass over an address being deleted, which leaves the
// gauge. It runs the driver's finalizer: delete the address's placeholders
// (releasing MetalLB's allocation), take the address back from every
// Service the driver pinned to it (releaseServices), then remove the
// finalizer, so an address never leaves the ledger while a Service keeps it.
func (r *Reconciler) teardown(ctx context.Context, s *scope) (phase.Result, error) {
	a := s.Addr
	r.states.forget(a.Name)
	if !controllerutil.ContainsFinalizer(a, marks.Finalizer) {
		return phase.Next(), nil
	}
	if pending, err := r.deletePlaceholders(ctx, a); err != nil || pending {
		return phase.WaitFor("the deleted placeholders to go", lookAgain), err
	}
	if ip, err := names.ParseAddress(a.Spec.Address); err == nil {
		pending, err := r.releaseServices(ctx, a, ip.String())
		if err != nil || pending {
			return phase.WaitFor("the pinned Services to let the address go", lookAgain), err
		}
	}
	if _, err := patch.RemoveFinalizer(ctx, r, a, marks.Finalizer); err != nil {
		return phase.Next(), client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("teardown done; released the driver's finalizer")
	return phase.Next(), nil
}

// deletePlaceholders deletes, as the API server lists them, the placeholders
// labelled with the address and the hold placeholder owned by it. pending
// is true while one of them is still there (it has finalizers).
func (r *Reconciler) deletePlaceholders(ctx context.Context, a *iadv1alpha1.IPAddress) (pending bool, err error) {
	phs, err := r.LivePlaceholders(ctx, a)
	if err != nil {
		return false, err
	}
	ph := &corev1.Service{}
	err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: r.PlaceholderNamespace, Name: placeholder.HoldName(a.Name)}, ph)
	switch {
	case err == nil && ph.Labels[marks.LabelAddress] != a.Name && hold.OwnedBy(ph, a):
		phs = append(phs, *ph)
	case err != nil && !apierrors.IsNotFound(err):
		return false, err
	}
	for i := range phs {
		ph := &phs[i]
		if len(ph.Finalizers) > 0 || ph.DeletionTimestamp != nil {
			pending = true
		}
		if ph.DeletionTimestamp != nil {
			continue
		}
		if _, err := patch.Delete(ctx, r, ph, false); err != nil {
			return false, err
		}
		log.FromContext(ctx).Info("teardown: deleted a placeholder", "placeholder", client.ObjectKeyFromObject(ph))
	}
	return pending, nil
}

// releaseServices runs the release sequence (internal/marks) on each
// Service outside the placeholder namespace that carries the driver's pin
// for the address (releaseStep); hand-written pins are left alone. The
// Service controller runs the same sequence when it detaches, so whichever
// gets there first, the other finds the step done. pending is true while a
// Service still has to let go.
func (r *Reconciler) releaseServices(ctx context.Context, a *iadv1alpha1.IPAddress, ip string) (pending bool, err error) {
	svcs, err := r.pinnedServices(ctx, a, ip)
	if err != nil {
		return false, err
	}
	logger := log.FromContext(ctx)
	for i := range svcs {
		svc := &svcs[i]
		step, m := releaseStep(svc, a, ip)
		switch step {
		case releaseNone:
			continue
		case releaseWait:
			pending = true
			continue
		}
		if err := patch.Meta(ctx, r, svc, func() { m.Apply(svc) }); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, err
		}
		key := client.ObjectKeyFromObject(svc)
		switch step {
		case releasePin:
			pending = true
			logger.Info("teardown: releasing the address from a Service", "service", key)
			r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonReleasing, msgTeardownReleasing(a, ip, m.Pin))
		case releaseWithdraw:
			logger.Info("teardown: withdrew the driver's pin", "service", key)
			r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonPinWithdrawn, msgPinWithdrawn(a, ip))
		case releaseDropIP:
			logger.Info("teardown: removed the address from a pin", "service", key)
			r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonPinWithdrawn, msgPinWithdrawn(a, ip))
		}
	}
	return pending, nil
}

// pinnedServices returns, from the cache, the Services outside the
// placeholder namespace that may carry the driver's pin for the address:
// those whose pin names ip, those whose ingress shows it, and the
// associated Service.
func (r *Reconciler) pinnedServices(ctx context.Context, a *iadv1alpha1.IPAddress, ip string) ([]corev1.Service, error) {
	seen := map[types.NamespacedName]bool{}
	var out []corev1.Service
	add := func(svcs ...corev1.Service) {
		for _, svc := range svcs {
			key := client.ObjectKeyFromObject(&svc)
			if svc.Namespace == r.PlaceholderNamespace || seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, svc)
		}
	}
	for _, field := range []string{index.ServiceByPinnedIP, index.ServiceByIngressIP} {
		var list corev1.ServiceList
		if err := r.List(ctx, &list, client.MatchingFields{field: ip}); err != nil {
			return nil, err
		}
		add(list.Items...)
	}
	if w := a.Status.AssociatedTo; w != nil && w.Kind == "Service" {
		svc := &corev1.Service{}
		switch err := r.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: w.Name}, svc); {
		case err == nil:
			add(*svc)
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	return out, nil
}
