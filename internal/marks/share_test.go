package marks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
)

func TestSharesHold(t *testing.T) {
	a := &iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-2"},
		Spec: iadv1alpha1.IPAddressSpec{Address: "10.0.0.2", ClaimRef: &iadv1alpha1.ClaimReference{Namespace: "t", Name: "c", UID: "u"}}}
	key := sharingkey.Keys{}.Of(a)
	base := func() *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web", Annotations: map[string]string{
				KeyPin: "10.0.0.2", KeyPinnedBy: "c",
				KeySharing: key, KeySharedBy: "c"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		edit func(s *corev1.Service)
		want bool
	}{
		{"the driver's pin and the address's key, port 80", func(*corev1.Service) {}, true},
		{"port 9/TCP, as the placeholder", func(s *corev1.Service) { s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: 9}) }, false},
		{"port 9/UDP does not collide", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: 9, Protocol: corev1.ProtocolUDP})
		}, true},
		{"externalTrafficPolicy Local", func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}, false},
		{"another key", func(s *corev1.Service) { s.Annotations[KeySharing] = "other" }, false},
		{"the key without the driver's marker", func(s *corev1.Service) { delete(s.Annotations, KeySharedBy) }, false},
		{"no pinned-by marker", func(s *corev1.Service) { delete(s.Annotations, KeyPinnedBy) }, false},
		{"a legacy key beside", func(s *corev1.Service) { s.Annotations[KeyLegacySharing] = key }, false},
		{"being deleted", func(s *corev1.Service) { s.DeletionTimestamp = &now }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.edit(s)
			assert.Equal(t, tc.want, SharesHold(s, key))
		})
	}
	assert.False(t, SharesHold(nil, key), "no Service")
}

func TestPairKey(t *testing.T) {
	const old, current = "metallb-iad-old", "metallb-iad-new"
	base := func() *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web", Annotations: map[string]string{
				KeyPin: "10.0.0.2", KeyPinnedBy: "c", KeySharing: old, KeySharedBy: "c"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{
				Ingress: []corev1.LoadBalancerIngress{{IP: "10.0.0.2"}}}},
		}
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		svc  func() *corev1.Service
		want string
	}{
		{"no Service", func() *corev1.Service { return nil }, current},
		{"shares under the key before a rotation: kept", base, old},
		{"shares under the current key", func() *corev1.Service {
			s := base()
			s.Annotations[KeySharing] = current
			return s
		}, current},
		{"not holding the address yet: the current key", func() *corev1.Service {
			s := base()
			s.Status.LoadBalancer.Ingress = nil
			return s
		}, current},
		{"a key the driver did not write", func() *corev1.Service {
			s := base()
			delete(s.Annotations, KeySharedBy)
			return s
		}, current},
		{"not pinned by the driver", func() *corev1.Service {
			s := base()
			delete(s.Annotations, KeyPinnedBy)
			return s
		}, current},
		{"being deleted", func() *corev1.Service {
			s := base()
			s.DeletionTimestamp = &now
			return s
		}, current},
		{"a shape that cannot share", func() *corev1.Service {
			s := base()
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			return s
		}, current},
	} {
		assert.Equal(t, tc.want, PairKey(tc.svc(), current, "10.0.0.2"), tc.name)
	}
}
