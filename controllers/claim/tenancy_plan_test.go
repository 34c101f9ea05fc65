package claim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/marks"
)

func TestNamespaceHolds(t *testing.T) {
	now := time.Now()
	addr := func(ns, claim, ip string, phase iadv1alpha1.IPAddressPhase) iadv1alpha1.IPAddress {
		return iadv1alpha1.IPAddress{
			Spec:   iadv1alpha1.IPAddressSpec{Address: ip, ClaimRef: &iadv1alpha1.ClaimReference{Namespace: ns, Name: claim}},
			Status: iadv1alpha1.IPAddressStatus{Phase: phase},
		}
	}
	ph := func(ns, claim string, f iadv1alpha1.IPFamily) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			marks.AnnotationClaimNamespace: ns, marks.AnnotationClaimName: claim, marks.AnnotationFamily: string(f)}}}
	}
	v4, v6 := iadv1alpha1.FamilyIPv4, iadv1alpha1.FamilyIPv6
	drawing := func(ns, claim string, f iadv1alpha1.IPFamily, since time.Time) draw.InFlightDraw {
		return draw.InFlightDraw{F: f, Since: since, Claim: types.NamespacedName{Namespace: ns, Name: claim}}
	}
	tests := []struct {
		name  string
		addrs []iadv1alpha1.IPAddress
		phs   []corev1.Service
		book  map[string]draw.InFlightDraw
		want  int
	}{
		{"nothing", nil, nil, nil, 0},
		{"bound addresses, a Dual claim counts twice",
			[]iadv1alpha1.IPAddress{addr("a", "x", "192.0.2.1", iadv1alpha1.AddressBound), addr("a", "y", "192.0.2.2", ""),
				addr("a", "y", "2001:db8::2", iadv1alpha1.AddressBound)}, nil, nil, 3},
		{"released and lost addresses are not held",
			[]iadv1alpha1.IPAddress{addr("a", "x", "192.0.2.1", iadv1alpha1.AddressReleased), addr("a", "y", "192.0.2.2", iadv1alpha1.AddressLost)}, nil, nil, 0},
		{"another namespace's are not counted",
			[]iadv1alpha1.IPAddress{addr("b", "x", "192.0.2.1", iadv1alpha1.AddressBound)}, []corev1.Service{ph("b", "z", v4)},
			map[string]draw.InFlightDraw{"p": drawing("b", "w", v4, now)}, 0},
		{"a placeholder being recorded counts once",
			[]iadv1alpha1.IPAddress{addr("a", "x", "192.0.2.1", "")}, []corev1.Service{ph("a", "x", v4), ph("a", "x", v6)}, nil, 2},
		{"a draw in the book, also listed, counts once; an old one not at all",
			nil, []corev1.Service{ph("a", "x", v4)},
			map[string]draw.InFlightDraw{"p1": drawing("a", "x", v4, now), "p2": drawing("a", "y", v4, now), "p3": drawing("a", "z", v4, now.Add(-draw.InflightMax))}, 2},
		{"a warm draw names no claim", nil, nil, map[string]draw.InFlightDraw{"w": {F: v4, Since: now}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, namespaceHolds("a", "", tt.addrs, tt.phs, tt.book, now))
		})
	}
}

func TestNamespaceHoldsLeavesTheClaimOut(t *testing.T) {
	now := time.Now()
	book := map[string]draw.InFlightDraw{
		"p1": {F: iadv1alpha1.FamilyIPv4, Since: now, Claim: types.NamespacedName{Namespace: "a", Name: "dual"}},
		"p2": {F: iadv1alpha1.FamilyIPv4, Since: now, Claim: types.NamespacedName{Namespace: "a", Name: "other"}},
	}
	assert.Equal(t, 1, namespaceHolds("a", "dual", nil, nil, book, now), "the deciding claim's own draws are not the others'")
}

func TestOverBound(t *testing.T) {
	assert.False(t, overBound(3, 1, 4), "the last address of the bound")
	assert.True(t, overBound(4, 1, 4), "at the bound")
	assert.True(t, overBound(3, 2, 4), "a Dual claim with room for one address takes neither")
	assert.False(t, overBound(2, 2, 4))
}
