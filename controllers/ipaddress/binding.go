package ipaddress

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// binding looks up the claim the claimRef names on the API server: the
// controller keeps no cache of claims.
func (r *Reconciler) binding(ctx context.Context, a *iadv1alpha1.IPAddress) (claimBinding, error) {
	ref := a.Spec.ClaimRef
	if ref == nil {
		return bindingNone, nil
	}
	c := &iadv1alpha1.IPAddressClaim{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, c)
	switch {
	case apierrors.IsNotFound(err):
		return bindingBroken, nil
	case err != nil:
		return bindingNone, err
	case ref.UID == "" || ref.UID == string(c.UID):
		return bindingStands, nil
	default:
		return bindingBroken, nil
	}
}
