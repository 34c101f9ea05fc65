package marks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

func TestAuthorizes(t *testing.T) {
	addr := func(assoc *iadv1alpha1.WorkloadReference, ref *iadv1alpha1.ClaimReference) *iadv1alpha1.IPAddress {
		return &iadv1alpha1.IPAddress{Spec: iadv1alpha1.IPAddressSpec{ClaimRef: ref}, Status: iadv1alpha1.IPAddressStatus{AssociatedTo: assoc}}
	}
	svc := func(ns, name string, ann map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}}
	}
	ref := &iadv1alpha1.ClaimReference{Namespace: "shop", Name: "web-ip"}
	both := map[string]string{iadv1alpha1.ServiceClaimAnnotation: "web-ip", KeyPinnedBy: "web-ip"}
	tests := []struct {
		name string
		a    *iadv1alpha1.IPAddress
		s    *corev1.Service
		want bool
	}{
		{"associated", addr(&iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "shop", Name: "web"}, ref), svc("shop", "web", nil), true},
		{"associated elsewhere", addr(&iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "shop", Name: "api"}, ref), svc("shop", "web", nil), false},
		{"same name other namespace", addr(&iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "shop", Name: "web"}, ref), svc("other", "web", nil), false},
		{"other kind", addr(&iadv1alpha1.WorkloadReference{Kind: "Gateway", Namespace: "shop", Name: "web"}, ref), svc("shop", "web", nil), false},
		{"handoff: claim annotation and marker", addr(nil, ref), svc("shop", "web", both), true},
		{"claim annotation without marker", addr(nil, ref), svc("shop", "web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: "web-ip"}), false},
		{"marker of another claim", addr(nil, ref), svc("shop", "web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: "web-ip", KeyPinnedBy: "x"}), false},
		{"detaching: marker without claim annotation", addr(nil, ref), svc("shop", "web", map[string]string{KeyPinnedBy: "web-ip"}), true},
		{"detaching: marker while the annotation names another claim", addr(nil, ref),
			svc("shop", "web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: "other", KeyPinnedBy: "web-ip"}), true},
		{"marker in another namespace", addr(nil, ref), svc("other", "web", map[string]string{KeyPinnedBy: "web-ip"}), false},
		{"marker, address associated elsewhere", addr(&iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "shop", Name: "api"}, ref),
			svc("shop", "web", map[string]string{KeyPinnedBy: "web-ip"}), true},
		{"empty marker, unnamed claim", addr(nil, &iadv1alpha1.ClaimReference{Namespace: "shop"}), svc("shop", "web", map[string]string{KeyPinnedBy: ""}), false},
		{"claim annotation in another namespace", addr(nil, ref), svc("other", "web", both), false},
		{"no binding", addr(nil, nil), svc("shop", "web", both), false},
		{"plain service", addr(nil, ref), svc("shop", "web", nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Authorizes(tt.a, tt.s))
		})
	}
}

// TestServed: the rule checkServed applies (Served), which internal/marks
// does not test itself.
func TestServed(t *testing.T) {
	ours := &iadv1alpha1.IPAddressClass{Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: names.Provisioner}}
	theirs := &iadv1alpha1.IPAddressClass{Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: "example.com/other"}}
	plain := &iadv1alpha1.IPAddress{}
	withFinalizer := &iadv1alpha1.IPAddress{}
	withFinalizer.Finalizers = []string{iadv1alpha1.AddressProtectionFinalizer, Finalizer}

	assert.True(t, Served(plain, ours), "class names us")
	assert.False(t, Served(plain, theirs), "class names another driver")
	assert.False(t, Served(withFinalizer, theirs), "class names another driver, even with our finalizer")
	assert.False(t, Served(plain, nil), "class gone, never ours")
	assert.True(t, Served(withFinalizer, nil), "class gone, still carries our finalizer")
}
