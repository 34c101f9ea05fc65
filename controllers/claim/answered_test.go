package claim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

func TestAnswered(t *testing.T) {
	now := metav1.Now()
	ph := func(role, ingress string) *corev1.Service {
		s := draw.RenderPlaceholder("ph", testClaim(iadv1alpha1.FamilyIPv4), "public", iadv1alpha1.FamilyIPv4)
		s.Labels[marks.LabelPlaceholder] = role
		if ingress != "" {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ingress}}
		}
		return s
	}
	going := ph(names.PlaceholderAllocation, "192.0.2.1")
	going.DeletionTimestamp = &now
	tests := []struct {
		name string
		ph   *corev1.Service
		want bool
	}{
		{"waiting for MetalLB", ph(names.PlaceholderAllocation, ""), false},
		{"answered", ph(names.PlaceholderAllocation, "192.0.2.1"), true},
		{"answered in another family", ph(names.PlaceholderAllocation, "2001:db8::1"), false},
		{"handed over", ph(names.PlaceholderHold, "192.0.2.1"), false},
		{"a warm placeholder", ph(names.PlaceholderWarm, "192.0.2.1"), false},
		{"being deleted", going, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, answered(tt.ph))
		})
	}
	assert.False(t, answered(&iadv1alpha1.IPAddressClaim{}), "not a Service")
}
