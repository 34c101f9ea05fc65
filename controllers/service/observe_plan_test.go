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
			a.Annotations = map[string]string{marks.KeyAttaching: holder}
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

func TestGivingUp(t *testing.T) {
	now := metav1.Now()
	addr := func(policy iadv1alpha1.ReclaimPolicy, deleting bool) *iadv1alpha1.IPAddress {
		a := address("tenant", "ip", nil)
		a.Spec.ReclaimPolicy = policy
		if deleting {
			a.DeletionTimestamp = &now
		}
		return a
	}
	live := &iadv1alpha1.IPAddressClaim{}
	gone := &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}
	tests := []struct {
		name     string
		pinnedBy string
		claim    *iadv1alpha1.IPAddressClaim
		a        *iadv1alpha1.IPAddress
		want     bool
	}{
		{"an address being deleted", "", live, addr(iadv1alpha1.ReclaimRetain, true), true},
		{"claim kept", "", live, addr(iadv1alpha1.ReclaimDelete, false), false},
		{"claim being deleted, Delete", "", gone, addr(iadv1alpha1.ReclaimDelete, false), true},
		{"claim gone, Delete", "", nil, addr(iadv1alpha1.ReclaimDelete, false), true},
		{"claim being deleted, Retain: kept, Released", "", gone, addr(iadv1alpha1.ReclaimRetain, false), false},
		{"the pin is for another claim", "old", nil, addr(iadv1alpha1.ReclaimDelete, false), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := annotatedService("tenant", "web", iadv1alpha1.ServiceClaimAnnotation, "ip")
			if tt.pinnedBy != "" {
				svc.Annotations[marks.KeyPinnedBy] = tt.pinnedBy
			}
			s := &scope{svc: svc, claimName: "ip", claim: tt.claim}
			assert.Equal(t, tt.want, s.givingUp([]*iadv1alpha1.IPAddress{tt.a}))
		})
	}
}

func TestConflicting(t *testing.T) {
	now := metav1.Now()
	web := annotatedService("tenant", "web")
	mine := address("tenant", "ip", &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant", Name: "web"})
	other := address("tenant", "ip", nil)
	lost := address("tenant", "ip", nil)
	lost.Status.Phase = iadv1alpha1.AddressLost
	leaving := address("tenant", "ip", nil)
	leaving.DeletionTimestamp = &now
	assert.False(t, conflicting(web, mine), "authorized")
	assert.True(t, conflicting(web, other), "not authorized")
	assert.False(t, conflicting(web, lost), "Lost: the IPAddress controller reports it")
	assert.False(t, conflicting(web, leaving), "being deleted: leaving the ledger")
}

func TestImportOutcomes(t *testing.T) {
	var o importOutcomes
	key := types.NamespacedName{Namespace: "tenant", Name: "web"}
	assert.True(t, o.changed(key, "u1", ReasonImportSkippedSharedIP))
	assert.False(t, o.changed(key, "u1", ReasonImportSkippedSharedIP), "once per reason")
	assert.True(t, o.changed(key, "u2", ReasonImportSkippedSharedIP), "a new Service of the same name")
	assert.True(t, o.changed(key, "u2", ReasonImportSkippedDualStack))
	o.forget(key)
	assert.True(t, o.changed(key, "u2", ReasonImportSkippedDualStack), "forgotten")
}
