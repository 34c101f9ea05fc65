package ipaddress

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// loadClass reads the address's class from the cache into the scope; nil
// when it does not exist.
func (r *Reconciler) loadClass(ctx context.Context, s *scope) (phase.Result, error) {
	c := &iadv1alpha1.IPAddressClass{}
	switch err := r.Get(ctx, types.NamespacedName{Name: s.Addr.Spec.ClassName}, c); {
	case apierrors.IsNotFound(err):
		s.class = nil
	case err != nil:
		return phase.Next(), err
	default:
		s.class = c
	}
	return phase.Next(), nil
}

// checkServed ends the pass on an address the driver does not serve
// (marks.Served), which leaves the gauge.
func (r *Reconciler) checkServed(_ context.Context, s *scope) (phase.Result, error) {
	if marks.Served(s.Addr, s.class) {
		return phase.Next(), nil
	}
	r.states.forget(s.Addr.Name)
	return phase.Halt("the driver does not serve the address", 0), nil
}

// ensureFinalizer adds the teardown finalizer, also to addresses created
// statically; the address as patched is the base of the status report.
func (r *Reconciler) ensureFinalizer(ctx context.Context, s *scope) (phase.Result, error) {
	if controllerutil.ContainsFinalizer(s.Addr, marks.Finalizer) {
		return phase.Next(), nil
	}
	if err := patch.AddFinalizer(ctx, r, s.Addr, marks.Finalizer); err != nil {
		return phase.Next(), err
	}
	s.rebase()
	return phase.Next(), nil
}

// parseAddress parses spec.address into the scope. An unparsable one gets
// a Warning and ends the pass: nothing can hold it.
func (r *Reconciler) parseAddress(_ context.Context, s *scope) (phase.Result, error) {
	a := s.Addr
	ip, err := names.ParseAddress(a.Spec.Address)
	if err != nil {
		r.Recorder.Event(a, corev1.EventTypeWarning, ReasonInvalidAddress, msgInvalidAddress(a.Spec.Address, err))
		return phase.Halt("spec.address does not parse", 0), nil
	}
	s.IP = ip
	return phase.Next(), nil
}
