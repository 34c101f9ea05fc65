package marks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/metallb-iad/internal/names"
)

func TestExempt(t *testing.T) {
	const phNS = "metallb-iad"
	svc := func(ns string, labels map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s", Labels: labels}}
	}
	placeholder := map[string]string{LabelPlaceholder: names.PlaceholderHold}
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		phNS string
		want bool
	}{
		{"a hold placeholder", svc(phNS, placeholder), phNS, true},
		{"an allocation placeholder", svc(phNS, map[string]string{LabelPlaceholder: names.PlaceholderAllocation}), phNS, true},
		{"a warm placeholder", svc(phNS, map[string]string{LabelPlaceholder: names.PlaceholderWarm}), phNS, true},
		{"any value of the label", svc(phNS, map[string]string{LabelPlaceholder: ""}), phNS, true},
		{"the label forged in a tenant namespace", svc("tenant", placeholder), phNS, false},
		{"an unlabelled Service in the placeholder namespace", svc(phNS, nil), phNS, false},
		{"other labels only", svc(phNS, map[string]string{LabelAddress: "a"}), phNS, false},
		{"no placeholder namespace configured", svc("", placeholder), "", false},
	} {
		assert.Equal(t, tc.want, Exempt(tc.svc, tc.phNS), tc.name)
	}
}

func TestHolds(t *testing.T) {
	svc := &corev1.Service{Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
		{IP: "192.0.2.1"}, {IP: "2001:db8:0::1"}, {Hostname: "lb.example.org"},
	}}}}
	assert.Equal(t, []string{"192.0.2.1", "2001:db8::1"}, IngressIPs(svc), "canonical, not-IPs skipped")
	for _, tc := range []struct {
		name     string
		ips      []string
		any, all bool
	}{
		{"none asked", nil, false, false},
		{"one held", []string{"192.0.2.1"}, true, true},
		{"IPv6 in canonical form", []string{"2001:db8::1"}, true, true},
		{"both held", []string{"192.0.2.1", "2001:db8::1"}, true, true},
		{"one of two held", []string{"192.0.2.1", "192.0.2.2"}, true, false},
		{"not held", []string{"192.0.2.2"}, false, false},
	} {
		assert.Equal(t, tc.any, Holds(svc, tc.ips...), tc.name)
		assert.Equal(t, tc.all, HoldsAll(svc, tc.ips...), tc.name)
	}
	assert.Empty(t, IngressIPs(&corev1.Service{}))
}
