package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
)

func annotatedService(ns, name string, ann ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{}}}
	for i := 0; i+1 < len(ann); i += 2 {
		s.Annotations[ann[i]] = ann[i+1]
	}
	return s
}

func TestBoundTo(t *testing.T) {
	claim := &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "ip", UID: "u1"}}
	now := metav1.Now()
	item := func(name string, uid string, deleting bool) iadv1alpha1.IPAddress {
		a := iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name}}
		a.Spec.ClaimRef = &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "ip", UID: uid}
		if deleting {
			a.DeletionTimestamp = &now
		}
		return a
	}
	got := boundTo(claim, []iadv1alpha1.IPAddress{
		item("a", "u1", false), item("b", "u0", false), item("c", "u1", true), item("d", "u1", false),
	})
	var gotNames []string
	for _, a := range got {
		gotNames = append(gotNames, a.Name)
	}
	assert.Equal(t, []string{"a", "d"}, gotNames, "bound to this claim's uid, not a predecessor's, and not being deleted")
	assert.Empty(t, boundTo(claim, nil))
}

func TestAssociatedHolder(t *testing.T) {
	now := metav1.Now()
	svcRef := &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant", Name: "api"}
	tests := []struct {
		name      string
		at        *iadv1alpha1.WorkloadReference
		other     *corev1.Service
		holder    string
		detaching bool
	}{
		{"another kind", &iadv1alpha1.WorkloadReference{Kind: "Gateway", Namespace: "tenant", Name: "gw"}, nil, "Gateway tenant/gw", false},
		{"a Service asking for the claim", svcRef,
			annotatedService("tenant", "api", iadv1alpha1.ServiceClaimAnnotation, "ip"), "tenant/api", false},
		{"a Service naming another claim", svcRef,
			annotatedService("tenant", "api", iadv1alpha1.ServiceClaimAnnotation, "other"), "tenant/api", true},
		{"a Service without the annotation", svcRef, annotatedService("tenant", "api"), "tenant/api", true},
		{"a Service being deleted", svcRef, func() *corev1.Service {
			s := annotatedService("tenant", "api", iadv1alpha1.ServiceClaimAnnotation, "ip")
			s.DeletionTimestamp = &now
			return s
		}(), "tenant/api", true},
		{"a Service of another namespace", &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "other", Name: "api"},
			annotatedService("other", "api", iadv1alpha1.ServiceClaimAnnotation, "ip"), "other/api", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			holder, detaching := associatedHolder(tt.at, tt.other, "tenant", "ip")
			assert.Equal(t, tt.holder, holder)
			assert.Equal(t, tt.detaching, detaching)
		})
	}
}

func TestGrantedTo(t *testing.T) {
	web := annotatedService("tenant", "web")
	granted := func(holder string, at *iadv1alpha1.WorkloadReference) *iadv1alpha1.IPAddress {
		a := address("tenant", "ip", at)
		if holder != "" {
			a.Annotations = map[string]string{marks.AnnotationAttaching: holder}
		}
		return a
	}
	tests := []struct {
		name string
		a    *iadv1alpha1.IPAddress
		want types.NamespacedName
		ok   bool
	}{
		{"no grant", granted("", nil), types.NamespacedName{}, false},
		{"granted to this Service", granted("tenant/web", nil), types.NamespacedName{}, false},
		{"associated with this Service", granted("tenant/api", &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant", Name: "web"}),
			types.NamespacedName{}, false},
		{"granted to another Service", granted("tenant/api", nil), types.NamespacedName{Namespace: "tenant", Name: "api"}, true},
		{"a grant naming another namespace", granted("other/api", nil), types.NamespacedName{}, false},
		{"a grant without a namespace", granted("api", nil), types.NamespacedName{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := grantedTo(tt.a, web)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestGrantHeld(t *testing.T) {
	now := metav1.Now()
	deleting := func(s *corev1.Service) *corev1.Service { s.DeletionTimestamp = &now; return s }
	tests := []struct {
		name            string
		other           *corev1.Service
		held, detaching bool
	}{
		{"asks for the claim", annotatedService("tenant", "api", iadv1alpha1.ServiceClaimAnnotation, " ip "), true, false},
		{"no longer asks but carries the pin", annotatedService("tenant", "api", marks.KeyPinnedBy, "ip"), true, true},
		{"being deleted with the pin", deleting(annotatedService("tenant", "api",
			iadv1alpha1.ServiceClaimAnnotation, "ip", marks.KeyPinnedBy, "ip")), true, true},
		{"being deleted without the pin: free", deleting(annotatedService("tenant", "api", iadv1alpha1.ServiceClaimAnnotation, "ip")), false, true},
		{"neither asks nor is pinned: free", annotatedService("tenant", "api", iadv1alpha1.ServiceClaimAnnotation, "other"), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			held, detaching := grantHeld(tt.other, "ip")
			assert.Equal(t, tt.held, held)
			assert.Equal(t, tt.detaching, detaching)
		})
	}
}

func TestPinnedIPs(t *testing.T) {
	s := annotatedService("tenant", "web", marks.KeyPin, "203.0.113.7,2001:db8::7")
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.1"}}
	assert.Equal(t, map[string]bool{"203.0.113.7": true, "2001:db8::7": true, "198.51.100.1": true}, pinnedIPs(s))
	assert.Empty(t, pinnedIPs(annotatedService("tenant", "web")))
}

func address(claimNS, claim string, associated *iadv1alpha1.WorkloadReference) *iadv1alpha1.IPAddress {
	a := &iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-203-0-113-7"},
		Spec:       iadv1alpha1.IPAddressSpec{Address: "203.0.113.7", ClassName: "public"},
		Status:     iadv1alpha1.IPAddressStatus{AssociatedTo: associated},
	}
	if claim != "" {
		a.Spec.ClaimRef = &iadv1alpha1.ClaimReference{Namespace: claimNS, Name: claim, UID: "u1"}
	}
	return a
}

func TestOnePerFamily(t *testing.T) {
	addr := func(name, ip string, phase iadv1alpha1.IPAddressPhase, associated bool) *iadv1alpha1.IPAddress {
		a := &iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:   iadv1alpha1.IPAddressSpec{Address: ip},
			Status: iadv1alpha1.IPAddressStatus{Phase: phase}}
		if associated {
			a.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant", Name: "web"}
		}
		return a
	}
	svc := func(held ...string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"}}
		for _, ip := range held {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		return s
	}
	bound := iadv1alpha1.AddressBound
	lost := iadv1alpha1.AddressLost
	v4a := addr("a4", "192.0.2.1", bound, false)
	v4b := addr("b4", "192.0.2.2", bound, false)
	v6a := addr("a6", "2001:db8::1", bound, false)
	for _, tc := range []struct {
		name  string
		addrs []*iadv1alpha1.IPAddress
		svc   *corev1.Service
		want  []string
	}{
		{"none", nil, svc(), nil},
		{"one of each family: both kept", []*iadv1alpha1.IPAddress{v6a, v4a}, svc(), []string{"a4", "a6"}},
		{"two of a family, nothing to choose by: the first by name", []*iadv1alpha1.IPAddress{v4b, v4a}, svc(), []string{"a4"}},
		{"a lost one gives way to its replacement",
			[]*iadv1alpha1.IPAddress{addr("a4", "192.0.2.1", lost, true), v4b}, svc("192.0.2.1"), []string{"b4"}},
		{"the one associated with the Service stays",
			[]*iadv1alpha1.IPAddress{v4a, addr("b4", "192.0.2.2", bound, true)}, svc(), []string{"b4"}},
		{"associated wins over held",
			[]*iadv1alpha1.IPAddress{v4a, addr("b4", "192.0.2.2", bound, true)}, svc("192.0.2.1"), []string{"b4"}},
		{"held wins over the name", []*iadv1alpha1.IPAddress{v4a, v4b}, svc("192.0.2.2"), []string{"b4"}},
		{"per family: IPv6 untouched by the IPv4 choice", []*iadv1alpha1.IPAddress{v4a, v6a, v4b}, svc("192.0.2.2"), []string{"a6", "b4"}},
		{"unparsable text is kept", []*iadv1alpha1.IPAddress{addr("x", "nonsense", bound, false), v4a}, svc(), []string{"a4", "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range OnePerFamily(tc.addrs, tc.svc) {
				got = append(got, a.Name)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
