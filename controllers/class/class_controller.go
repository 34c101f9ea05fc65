// Package class renders MetalLB's configuration for every IPAddressClass
// that names this driver: one IPAddressPool iad-<class> and one
// advertisement selecting it, both owned by the class.
package class

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// Reconciler reconciles IPAddressClasses into MetalLB pools and advertisements.
type Reconciler struct {
	client.Client
	// MetalLBNamespace is where the pools and advertisements are rendered.
	MetalLBNamespace string
}

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=get;list;watch

// Reconcile renders one class.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("class").For(&iadv1alpha1.IPAddressClass{}).Complete(r)
}
