package cluster

import (
	"context"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/parking"
)

// ParkingAddresses are the parking pool's ranges, the chart's defaults.
var ParkingAddresses = []string{"240.0.0.0/16", "100::/112"}

// ParkingPool is the parking pool as the chart installs it for placeholders
// in placeholderNamespace.
func ParkingPool(placeholderNamespace string) *metallbv1beta1.IPAddressPool {
	return &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: MetalLBNamespace, Name: parking.DefaultPool},
		Spec: metallbv1beta1.IPAddressPoolSpec{
			Addresses:     ParkingAddresses,
			AutoAssign:    ptr.To(false),
			AvoidBuggyIPs: true,
			AllocateTo: &metallbv1beta1.ServiceAllocation{
				Namespaces:       []string{placeholderNamespace},
				ServiceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{marks.LabelPlaceholder: names.PlaceholderHold}}},
			},
		},
	}
}

// InstallParkingPool creates the parking pool (ParkingPool) for the
// driver's placeholders in DriverNamespace, as the chart does.
func (c *Cluster) InstallParkingPool(ctx context.Context) error {
	if err := c.Client.Create(ctx, ParkingPool(DriverNamespace)); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
