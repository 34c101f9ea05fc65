package claim

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

// The claim controller's cache keeps placeholders trimmed, as the other
// controllers keep their Services.
func TestCacheTrimsPlaceholders(t *testing.T) {
	var found bool
	for obj, byObject := range CacheOptions(&bootstrap.Options{PlaceholderNamespace: "ns"}) {
		if _, ok := obj.(*corev1.Service); !ok {
			continue
		}
		found = true
		require.NotNil(t, byObject.Transform)
		svc := &corev1.Service{Spec: corev1.ServiceSpec{
			SessionAffinity: corev1.ServiceAffinityClientIP,
			Ports:           []corev1.ServicePort{{Port: 9, TargetPort: intstr.FromInt32(9), Protocol: corev1.ProtocolTCP}},
		}}
		out, err := byObject.Transform(svc)
		require.NoError(t, err)
		trimmed := out.(*corev1.Service)
		require.Empty(t, trimmed.Spec.SessionAffinity)
		require.Equal(t, []corev1.ServicePort{{Port: 9, Protocol: corev1.ProtocolTCP}}, trimmed.Spec.Ports)
	}
	require.True(t, found, "the cache options narrow Services")
}
