package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
)

// workload is a LoadBalancer Service with the given ports and annotations
// (pairs of key and value).
func workload(ports []corev1.ServicePort, ann ...string) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "web"},
			Ports:    ports,
		},
	}
	for i := 0; i+1 < len(ann); i += 2 {
		s.Annotations[ann[i]] = ann[i+1]
	}
	return s
}

func port(proto corev1.Protocol, n int32) corev1.ServicePort {
	return corev1.ServicePort{Name: "p", Protocol: proto, Port: n, TargetPort: intstr.FromInt32(n)}
}

func TestShareProblem(t *testing.T) {
	const key = "metallb-iad-0123456789abcdef0123456789abcdef"
	http := []corev1.ServicePort{port(corev1.ProtocolTCP, 80), port(corev1.ProtocolTCP, 443)}
	with := func(s *corev1.Service, f func(*corev1.Service)) *corev1.Service { f(s); return s }
	tests := []struct {
		name     string
		svc      *corev1.Service
		key      string
		contains string // "" means shareable
	}{
		{"plain web Service", workload(http), key, ""},
		{"traffic policy Cluster", with(workload(http), func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}), key, ""},
		{"port 9 over UDP does not overlap the placeholder's TCP", workload([]corev1.ServicePort{port(corev1.ProtocolUDP, 9)}), key, ""},
		{"port 9 over SCTP does not overlap either", workload([]corev1.ServicePort{port(corev1.ProtocolSCTP, 9)}), key, ""},
		{"our own key and marker from an earlier pass", workload(http, marks.KeySharing, key, marks.KeySharedBy, "ip"), key, ""},
		{"our stale key (another claim) is ours to replace", workload(http, marks.KeySharing, "old", marks.KeySharedBy, "old-ip"), key, ""},
		{"our own pin", workload(http, marks.KeyPin, "203.0.113.7", marks.KeyPinnedBy, "ip"), key, ""},

		{"port 9/TCP overlaps the placeholder", workload([]corev1.ServicePort{port(corev1.ProtocolTCP, 80), port(corev1.ProtocolTCP, 9)}), key,
			"port 9/TCP, which the placeholder holding the address uses too"},
		{"an empty protocol is TCP", workload([]corev1.ServicePort{{Name: "p", Port: 9}}), key, "port 9/TCP"},
		{"traffic policy Local", with(workload(http), func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}), key, "externalTrafficPolicy is Local"},
		{"hand-written sharing key", workload(http, marks.KeySharing, "team-a"), key, `metallb.io/allow-shared-ip ("team-a")`},
		{"hand-written key equal to ours is still not ours", workload(http, marks.KeySharing, key), key, "carries its own metallb.io/allow-shared-ip"},
		{"hand-written empty key", workload(http, marks.KeySharing, ""), key, `metallb.io/allow-shared-ip ("")`},
		{"legacy sharing key", workload(http, marks.KeyLegacySharing, "team-a"), key, `metallb.universe.tf/allow-shared-ip ("team-a")`},
		{"legacy key beside ours", workload(http, marks.KeySharing, key, marks.KeySharedBy, "ip",
			marks.KeyLegacySharing, "x"), key, "metallb.universe.tf/allow-shared-ip"},
		{"hand pin", workload(http, marks.KeyPin, "203.0.113.7"), key, "its own MetalLB pin (203.0.113.7)"},
		{"spec.loadBalancerIP", with(workload(http), func(s *corev1.Service) { s.Spec.LoadBalancerIP = "203.0.113.7" }), key, "its own MetalLB pin"},
		{"no common key", workload(http), "", "no common sharing key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ShareProblem(tt.svc, tt.key)
			if tt.contains == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tt.contains)
		})
	}
}

func TestSharingKeyOf(t *testing.T) {
	v4 := address("tenant", "ip", nil)
	v6 := address("tenant", "ip", nil)
	v6.Name, v6.Spec.Address = "ip6-2001-0db8-0000-0000-0000-0000-0000-0007", "2001:db8::7"
	other := address("tenant", "other", nil)
	assert.Equal(t, sharingkey.Keys{}.Of(v4), SharingKeyOf(sharingkey.Keys{}, []*iadv1alpha1.IPAddress{v4, v6}), "a Dual claim has one key")
	assert.Equal(t, sharingkey.Keys{}.Claim("tenant", "ip", "u1"), SharingKeyOf(sharingkey.Keys{}, []*iadv1alpha1.IPAddress{v4}))
	assert.Empty(t, SharingKeyOf(sharingkey.Keys{}, []*iadv1alpha1.IPAddress{v4, other}), "addresses of two bindings")
	assert.Empty(t, SharingKeyOf(sharingkey.Keys{}, nil))
}

func TestAttachMode(t *testing.T) {
	tests := []struct {
		name               string
		problem            string
		released, holdsAll bool
		parking            bool
		mode, why          string
	}{
		{"shareable, fresh", "", false, false, false, ModeShared, ""},
		{"shareable, the Service already holds the addresses", "", false, true, false, ModeShared, ""},
		{"shareable, released after the Service took the addresses (shared handoff done)", "", true, true, false, ModeShared, ""},
		{"shareable, but a gap handoff is under way", "", true, false, false, ModeGap, "the placeholder had already let go"},
		{"not shareable", "the Service uses port 9/TCP", false, false, false, ModeGap, "port 9/TCP"},
		{"not shareable, attached", "the Service uses port 9/TCP", true, true, false, ModeGap, "port 9/TCP"},
		{"shareable, parking open", "", false, false, true, ModeParked, ""},
		{"not shareable, parking open", "the Service uses port 9/TCP", false, false, true, ModeParked, ""},
		{"a gap handoff under way, parking open: parked (the same steps)", "", true, false, true, ModeParked, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mode, why := AttachMode(tt.problem, tt.released, tt.holdsAll, tt.parking)
			assert.Equal(t, tt.mode, mode)
			if tt.why == "" {
				assert.Empty(t, why)
			} else {
				assert.Contains(t, why, tt.why)
			}
		})
	}
}

func TestUnkeyedHolder(t *testing.T) {
	const key, phNS = "k", "iad-system"
	holder := func(ns, name string, labelled bool, ann ...string) corev1.Service {
		s := *workload(nil, ann...)
		s.Namespace, s.Name = ns, name
		if labelled {
			s.Labels = map[string]string{marks.LabelPlaceholder: names.PlaceholderHold}
		}
		return s
	}
	for _, tt := range []struct {
		name    string
		holders []corev1.Service
		want    string
	}{
		{"nobody holds the address: nothing to wait for", nil, ""},
		{"the hold carries the key", []corev1.Service{holder(phNS, "hold", true, marks.KeySharing, key)}, ""},
		{"the hold carries no key yet", []corev1.Service{holder(phNS, "hold", true)}, "hold"},
		{"the hold carries another key", []corev1.Service{holder(phNS, "hold", true, marks.KeySharing, "old")}, "hold"},
		{"a workload without the key is not a placeholder", []corev1.Service{holder("tenant", "web", false)}, ""},
		{"an unlabelled Service of the placeholder namespace is not a placeholder", []corev1.Service{holder(phNS, "x", false)}, ""},
		{"the second holder lacks it", []corev1.Service{
			holder(phNS, "hold", true, marks.KeySharing, key), holder(phNS, "alloc", true)}, "alloc"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := UnkeyedHolder(tt.holders, key, phNS)
			if tt.want == "" {
				assert.Nil(t, got)
			} else if assert.NotNil(t, got) {
				assert.Equal(t, tt.want, got.Name)
			}
		})
	}
}

func TestReleased(t *testing.T) {
	a := address("tenant", "ip", nil)
	assert.False(t, Released(a), "no condition yet")
	conditions.Set(&a.Status.Conditions, conditions.Held, metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder, "", 1)
	assert.False(t, Released(a))
	conditions.Set(&a.Status.Conditions, conditions.Held, metav1.ConditionFalse, conditions.ReasonTakenElsewhere, "", 1)
	assert.False(t, Released(a), "False for another reason is no release")
	conditions.Set(&a.Status.Conditions, conditions.Held, metav1.ConditionFalse, conditions.ReasonReleasedForWorkload, "", 1)
	assert.True(t, Released(a))
}

// TestFreeForAndParkedAway: the two views of the service controller's
// cache a gap or parked handoff pins on. FreeFor: nothing is about to take
// the address (it backs Held=False, which an earlier attachment may have
// left); ParkedAway: the parked holds have moved off it (it needs no Held).
func TestFreeForAndParkedAway(t *testing.T) {
	const ip, pool = "192.0.2.7", "parking"
	web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web"}}
	ph := func(asked string, deleting bool, ingress ...string) corev1.Service {
		s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "iad-system", Name: "hold"}}
		if deleting {
			s.DeletionTimestamp = &metav1.Time{}
		}
		marks.Edit(&s, func(m *marks.Marks) {
			if asked == pool {
				m.Park(pool)
			} else {
				m.Hold(ip, "", asked)
			}
		})
		for _, in := range ingress {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: in})
		}
		return s
	}
	holder := func(ns, name string) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	svcs := func(s ...corev1.Service) []corev1.Service { return s }
	for _, tc := range []struct {
		name                 string
		placeholders         []corev1.Service
		holders              []corev1.Service
		wantFree, wantParked bool
	}{
		{"no placeholder, nobody holds it (the gap handoff)", nil, nil, true, false},
		{"no placeholder, the Service holds it already", nil, svcs(holder("t", "web")), true, false},
		{"parked and moved, nobody holds the address", svcs(ph(pool, false, "240.0.0.1")), nil, true, true},
		{"parked and moved, the Service holds it already", svcs(ph(pool, false, "240.0.0.1")), svcs(holder("t", "web")), true, true},
		{"parked, MetalLB has not moved it", svcs(ph(pool, false, ip)), svcs(ph(pool, false, ip)), false, false},
		{"parked, MetalLB gave it nothing yet: not seen moving", svcs(ph(pool, false)), nil, true, false},
		// Held False from an earlier attachment says released; the hold
		// pinned back says otherwise, and takes the address first.
		{"a hold pinned back, MetalLB has not given it the address yet", svcs(ph("iad-gold", false)), nil, false, false},
		{"a hold pinned back and holding", svcs(ph("iad-gold", false, ip)), svcs(ph("iad-gold", false, ip)), false, false},
		{"a hold being deleted, MetalLB let go", svcs(ph("iad-gold", true)), nil, true, false},
		{"a hold being deleted, still holding", svcs(ph("iad-gold", true, ip)), nil, false, false},
		{"another Service shows the address", svcs(ph(pool, false, "240.0.0.1")), svcs(holder("t", "api")), false, false},
		{"one of two placeholders still holds it", svcs(ph(pool, false, "240.0.0.1"), ph("iad-gold", false, ip)), nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.wantFree, FreeFor(ip, pool, tc.placeholders, tc.holders, web), "FreeFor")
			assert.Equal(t, tc.wantParked, ParkedAway(ip, pool, tc.placeholders, tc.holders, web), "ParkedAway")
		})
	}
}
