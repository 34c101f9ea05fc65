package ipaddress

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// TestPlanHoldImporting: an address being imported from a Service that
// holds it gets no hold placeholder; anything short of that is held as
// usual.
func TestPlanHoldImporting(t *testing.T) {
	const ip = "192.0.2.7"
	imported := func() *iadv1alpha1.IPAddress {
		a := bound(address("ip-192-0-2-7", ip), "shop", "web-imported-1")
		a.Labels = map[string]string{names.LabelImported: "true"}
		return a
	}
	marked := svc("shop", "web", "", ip,
		iadv1alpha1.ServiceClaimAnnotation, "web-imported-1", marks.KeyImportedInto, "web-imported-1")
	importing := &heldState{metav1.ConditionUnknown, conditions.ReasonImporting,
		"Service shop/web holds 192.0.2.7 and is being imported into the address's claim; it keeps the address, so no placeholder is created"}

	tests := []struct {
		name    string
		addr    *iadv1alpha1.IPAddress
		holders []corev1.Service
		want    *heldState // nil: a hold placeholder is created
	}{
		{"the marked Service holds the address", imported(), []corev1.Service{marked}, importing},
		{"not labelled as imported", bound(address("ip-192-0-2-7", ip), "shop", "web-imported-1"), []corev1.Service{marked}, nil},
		{"already associated: the usual release", associated(imported(), "shop", "web"), []corev1.Service{marked}, nil},
		{"the Service does not hold it (deleted, or MetalLB let go)", imported(), nil, nil},
		{"Service in another namespace", imported(), []corev1.Service{svc("other", "web", "", ip,
			iadv1alpha1.ServiceClaimAnnotation, "web-imported-1", marks.KeyImportedInto, "web-imported-1")}, nil},
		{"claim annotation removed", imported(), []corev1.Service{svc("shop", "web", "", ip, marks.KeyImportedInto, "web-imported-1")}, nil},
		{"marker missing", imported(), []corev1.Service{svc("shop", "web", "", ip, iadv1alpha1.ServiceClaimAnnotation, "web-imported-1")}, nil},
		{"being deleted", imported(), []corev1.Service{deleting(marked)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planHold(tt.addr, ip, marks.Keys{}.Of(tt.addr), "", phNS, parkOpt{}, nil, tt.holders, nil, nil)
			if tt.want != nil {
				assert.False(t, p.Create, "no placeholder")
				assert.Equal(t, tt.want, p.Held)
				return
			}
			if tt.addr.Status.AssociatedTo != nil {
				assert.False(t, p.Create)
				assert.Equal(t, conditions.ReasonReleasedForWorkload, p.Held.Reason)
				return
			}
			assert.True(t, p.Create, "a hold placeholder is created")
		})
	}
}
