package placeholder

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

func TestSpec(t *testing.T) {
	for _, f := range []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol} {
		s := Spec(f)
		assert.Equal(t, corev1.ServiceTypeLoadBalancer, s.Type)
		assert.Empty(t, s.Selector, "selectorless: no endpoints, never announced")
		assert.False(t, *s.AllocateLoadBalancerNodePorts)
		assert.Equal(t, []corev1.IPFamily{f}, s.IPFamilies)
		assert.Equal(t, corev1.IPFamilyPolicySingleStack, *s.IPFamilyPolicy)
		assert.Equal(t, []corev1.ServicePort{Port()}, s.Ports)
	}
	a, b := Spec(corev1.IPv4Protocol), Spec(corev1.IPv4Protocol)
	*a.IPFamilyPolicy = corev1.IPFamilyPolicyPreferDualStack
	assert.Equal(t, corev1.IPFamilyPolicySingleStack, *b.IPFamilyPolicy, "each call returns its own pointers")
}

func TestOwnerRef(t *testing.T) {
	a := &iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-192-0-2-7", UID: "u1"}}
	ref := OwnerRef(a)
	assert.Equal(t, "local.sdn.cozystack.io/v1alpha1", ref.APIVersion)
	assert.Equal(t, "IPAddress", ref.Kind)
	assert.Equal(t, "ip-192-0-2-7", ref.Name)
	assert.Equal(t, "u1", string(ref.UID))
	assert.False(t, *ref.Controller)
	assert.False(t, *ref.BlockOwnerDeletion)
}

func TestPlaceholderNames(t *testing.T) {
	n := AllocationName("3f6d3c38-5a0e-4a8c-9d2a-0d4b0c7e1f20", "IPv6")
	assert.Equal(t, "alloc-ipv6-3f6d3c38-5a0e-4a8c-9d2a-0d4b0c7e1f20", n)
	assert.Empty(t, validation.IsDNS1035Label(n))

	tests := []struct{ address, want string }{
		{"ip-203-0-113-7", "hold-ip-203-0-113-7"},
		{"ip6-2001-0db8-0000-0000-0000-0000-0000-0007", "hold-ip6-2001-0db8-0000-0000-0000-0000-0000-0007"},
		{"static.example.org", ""}, // dots: hashed
		{"a-very-long-admin-chosen-name-for-a-static-address-that-goes-on-and-on", ""},
	}
	for _, tt := range tests {
		got := HoldName(tt.address)
		assert.Empty(t, validation.IsDNS1035Label(got), got)
		if tt.want != "" {
			assert.Equal(t, tt.want, got)
		}
	}
	assert.NotEqual(t, HoldName("a.b"), HoldName("a.c"))
}
