package servicecache

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/cozystack/metallb-iad/internal/marks"
)

func TestTrim(t *testing.T) {
	policy := corev1.IPFamilyPolicyRequireDualStack
	in := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "t", Name: "web", UID: "u", ResourceVersion: "7",
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{marks.KeyLastApplied: "{}", "metallb.io/loadBalancerIPs": "192.0.2.7"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "IPAddress", Name: "a", UID: "ua", Controller: ptr.To(true)}},
			Finalizers:      []string{"x/f"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			Selector:              map[string]string{"app": "web"},
			Ports:                 []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080}},
			ClusterIP:             "10.96.0.10",
			ClusterIPs:            []string{"10.96.0.10", "fd00:10:96::a"},
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			IPFamilyPolicy:        &policy,
			LoadBalancerIP:        "192.0.2.7",
			LoadBalancerClass:     ptr.To("example.com/lb"),
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
		},
		Status: corev1.ServiceStatus{
			LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}}},
			Conditions:   []metav1.Condition{{Type: "x"}},
		},
	}
	out, err := Trim(in)
	require.NoError(t, err)
	got := out.(*corev1.Service)

	assert.Equal(t, map[string]string{"metallb.io/loadBalancerIPs": "192.0.2.7"}, got.Annotations, "without kubectl's copy")
	assert.Equal(t, in.Labels, got.Labels)
	assert.Equal(t, in.OwnerReferences, got.OwnerReferences, "a hold placeholder's owner")
	assert.Equal(t, in.Finalizers, got.Finalizers)
	assert.Equal(t, "7", got.ResourceVersion, "the optimistic lock needs it")
	assert.Nil(t, got.ManagedFields)
	assert.Equal(t, corev1.ServiceSpec{
		Type:                  corev1.ServiceTypeLoadBalancer,
		Ports:                 []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		ClusterIP:             "10.96.0.10",
		ClusterIPs:            in.Spec.ClusterIPs,
		IPFamilies:            in.Spec.IPFamilies,
		IPFamilyPolicy:        &policy,
		LoadBalancerIP:        "192.0.2.7",
		LoadBalancerClass:     ptr.To("example.com/lb"),
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
	}, got.Spec, "the sharing inputs, the families, the pin and the class; not the selector")
	assert.Equal(t, corev1.ServiceStatus{LoadBalancer: in.Status.LoadBalancer}, got.Status)
	assert.Contains(t, in.Annotations, marks.KeyLastApplied, "the input is not modified")
	assert.NotNil(t, in.ManagedFields, "the input is not modified")

	other := "not a service"
	kept, err := Trim(other)
	require.NoError(t, err)
	assert.Equal(t, other, kept)
}
