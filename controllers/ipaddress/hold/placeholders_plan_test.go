package hold

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

func TestOwnPlaceholder(t *testing.T) {
	a := bound(address("ip-192-0-2-1", "192.0.2.1"), "tenant", "a")
	ph := func(role string, mut func(s *corev1.Service)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: phNS, Name: "p",
			Labels:      map[string]string{marks.LabelPlaceholder: role, marks.LabelAddress: a.Name},
			Annotations: map[string]string{}}}
		mut(s)
		return s
	}
	owned := func(s *corev1.Service) { s.OwnerReferences = []metav1.OwnerReference{placeholder.OwnerRef(a)} }
	claimUID := func(uid string) func(s *corev1.Service) {
		return func(s *corev1.Service) { s.Labels[marks.LabelClaimUID] = uid }
	}
	other := address("ip-192-0-2-1", "192.0.2.1")
	other.UID = "an-earlier-address"
	ownedByOther := func(s *corev1.Service) { s.OwnerReferences = []metav1.OwnerReference{placeholder.OwnerRef(other)} }
	noUID := bound(address("ip-192-0-2-1", "192.0.2.1"), "tenant", "a")
	noUID.Spec.ClaimRef.UID = ""
	byName := func(s *corev1.Service) {
		s.Annotations[marks.AnnotationClaimNamespace] = "tenant"
		s.Annotations[marks.AnnotationClaimName] = "a"
	}

	assert.True(t, ownPlaceholder(a, ph(names.PlaceholderHold, owned)), "a hold placeholder owned by the address")
	assert.False(t, ownPlaceholder(a, ph(names.PlaceholderHold, func(*corev1.Service) {})), "a hold placeholder owned by nothing")
	assert.False(t, ownPlaceholder(a, ph(names.PlaceholderHold, ownedByOther)), "a hold placeholder of an earlier address of that name")
	assert.True(t, ownPlaceholder(a, ph(names.PlaceholderAllocation, claimUID("claim-uid"))), "an allocation placeholder of the bound claim")
	assert.False(t, ownPlaceholder(a, ph(names.PlaceholderAllocation, claimUID("another-claim"))), "an allocation placeholder of another claim")
	assert.False(t, ownPlaceholder(address("ip-192-0-2-1", "192.0.2.1"), ph(names.PlaceholderAllocation, claimUID("claim-uid"))), "unbound address")
	assert.True(t, ownPlaceholder(noUID, ph(names.PlaceholderAllocation, byName)), "claimRef without uid: by claim name")
	assert.False(t, ownPlaceholder(a, ph("something-else", owned)), "unknown role")
}
