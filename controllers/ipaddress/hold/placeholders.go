package hold

import (
	"context"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// liveRecording reads from the API server the allocation placeholder of
// the address's claim, returned while it holds the address and is not
// handed over yet (recordingPlaceholder).
func (k *Keeper) liveRecording(ctx context.Context, v *holdView) (*corev1.Service, error) {
	ref := v.addr.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return nil, nil
	}
	family := iadv1alpha1.FamilyIPv4
	if netip.MustParseAddr(v.ip).Is6() {
		family = iadv1alpha1.FamilyIPv6
	}
	ph := &corev1.Service{}
	key := types.NamespacedName{Namespace: k.PlaceholderNamespace, Name: placeholder.AllocationName(types.UID(ref.UID), string(family))}
	if err := k.APIReader.Get(ctx, key, ph); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return recordingPlaceholder(v.addr, v.ip, k.PlaceholderNamespace, []corev1.Service{*ph}), nil
}
