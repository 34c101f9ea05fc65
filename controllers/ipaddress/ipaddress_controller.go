// Package ipaddress enforces the holding invariant on IPAddresses, tears them down and recovers conflicts.
package ipaddress

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// Reconciler is the ipaddress controller.
type Reconciler struct {
	client.Client
	// PlaceholderNamespace holds the driver's placeholder Services.
	PlaceholderNamespace string
}

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=get;list;watch

// Reconcile handles one object.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("ipaddress").For(&iadv1alpha1.IPAddress{}).Complete(r)
}

var _ = iadv1alpha1.GroupVersion
