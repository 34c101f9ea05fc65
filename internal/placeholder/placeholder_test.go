package placeholder

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		assert.Equal(t, []corev1.ServicePort{Port}, s.Ports)
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
