// Package service associates Services with claims (the gap handoff), detaches them and detects conflicts.
package service

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// Reconciler is the service controller.
type Reconciler struct {
	client.Client
	// PlaceholderNamespace holds the driver's placeholder Services.
	PlaceholderNamespace string
}

// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch

// Reconcile handles one object.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("service").For(&corev1.Service{}).Complete(r)
}

var _ = iadv1alpha1.GroupVersion
