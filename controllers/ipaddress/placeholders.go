package ipaddress

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
)

// cachedPlaceholders lists the address's own placeholders from the cache.
func (r *Reconciler) cachedPlaceholders(ctx context.Context, a *iadv1alpha1.IPAddress) ([]corev1.Service, error) {
	var list corev1.ServiceList
	err := r.List(ctx, &list, client.InNamespace(r.PlaceholderNamespace),
		client.MatchingFields{index.PlaceholderByAddress: a.Name})
	return ownPlaceholders(a, list.Items), err
}

// livePlaceholders lists the same from the API server.
func (r *Reconciler) livePlaceholders(ctx context.Context, a *iadv1alpha1.IPAddress) ([]corev1.Service, error) {
	var list corev1.ServiceList
	err := r.APIReader.List(ctx, &list, client.InNamespace(r.PlaceholderNamespace),
		client.MatchingLabels{names.LabelAddress: a.Name})
	return ownPlaceholders(a, list.Items), err
}
