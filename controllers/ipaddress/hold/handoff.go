package hold

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/patch"
)

// parkPlaceholders moves the placeholders it is given to the parking
// pool, each with an optimistic lock.
func (k *Keeper) parkPlaceholders(ctx context.Context, phs []*corev1.Service) error {
	for _, ph := range phs {
		err := patch.Meta(ctx, k, ph, func() { marks.Edit(ph, func(m *marks.Marks) { m.Park(k.ParkingPool) }) })
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		log.FromContext(ctx).Info("parked a placeholder", "placeholder", client.ObjectKeyFromObject(ph), "pool", k.ParkingPool)
	}
	return nil
}
