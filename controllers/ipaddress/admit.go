package ipaddress

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
)

// class returns the named class from the cache, nil when it does not exist.
func (r *Reconciler) class(ctx context.Context, name string) (*iadv1alpha1.IPAddressClass, error) {
	c := &iadv1alpha1.IPAddressClass{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return c, nil
}

// ensureFinalizer adds the teardown finalizer, also to addresses created
// statically.
func (r *Reconciler) ensureFinalizer(ctx context.Context, a *iadv1alpha1.IPAddress) error {
	return patch.AddFinalizer(ctx, r, a, names.Finalizer)
}

// newScope parses the address. An unparsable spec.address gets a Warning
// and no scope: nothing can hold it.
func (r *Reconciler) newScope(a *iadv1alpha1.IPAddress, class *iadv1alpha1.IPAddressClass) *scope {
	ip, err := names.ParseAddress(a.Spec.Address)
	if err != nil {
		r.Recorder.Event(a, corev1.EventTypeWarning, ReasonInvalidAddress, msgInvalidAddress(a.Spec.Address, err))
		return nil
	}
	return &scope{addr: a, orig: a.DeepCopy(), ip: ip, key: r.Keys.Of(a), class: class}
}
