package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

func TestPlanRelease(t *testing.T) {
	active := releaseFacts{Active: true, Release: "::", Mode: ModeGap}
	with := func(f releaseFacts, edit func(*releaseFacts)) releaseFacts { edit(&f); return f }
	byGrant := func(f *releaseFacts) { f.All, f.ByGrant, f.Release = true, true, "" }
	tests := []struct {
		name string
		f    releaseFacts
		want releaseStep
	}{
		{"nothing pinned: clear", releaseFacts{}, releaseClear},
		{"being deleted: clear, its deletion frees the addresses", releaseFacts{Deleting: true, LettingGo: true}, releaseClear},
		{"let go in one write, MetalLB still shows it: wait", releaseFacts{LettingGo: true}, releaseWait},

		{"gap, release pin not written yet: write it", active, releaseWrite},
		{"shared, not started: hand back first", with(active, func(f *releaseFacts) { f.Mode = ModeShared }), releaseHandBack},
		{"started, the Service still holds: wait", with(active, func(f *releaseFacts) { f.Started, f.Holds = true, true }), releaseWait},
		{"started, MetalLB let go: clear", with(active, func(f *releaseFacts) { f.Started = true }), releaseClear},
		{"started, let go in one write still shown: wait", with(active, func(f *releaseFacts) { f.Started, f.LettingGo = true, true }), releaseWait},

		{"by grant, everything, gap: one write", with(active, byGrant), releaseLetGo},
		{"by grant, everything, shared beside a placeholder: one write", with(active, func(f *releaseFacts) {
			byGrant(f)
			f.Mode, f.HeldBeside = ModeShared, true
		}), releaseLetGo},
		{"by grant, shared, no placeholder beside yet: hand back", with(active, func(f *releaseFacts) {
			byGrant(f)
			f.Mode = ModeShared
		}), releaseHandBack},
		{"by grant but still asks for the claim: two writes", with(active, func(f *releaseFacts) {
			byGrant(f)
			f.Asks = true
		}), releaseWrite},
		{"by grant, only the stale addresses: two writes", with(active, func(f *releaseFacts) {
			byGrant(f)
			f.All = false
		}), releaseWrite},
		{"by grant, already started: wait while held", with(active, func(f *releaseFacts) {
			byGrant(f)
			f.Started, f.Holds = true, true
		}), releaseWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, planRelease(tt.f))
		})
	}
}

func TestOneWriteCandidate(t *testing.T) {
	f := releaseFacts{All: true, ByGrant: true}
	assert.True(t, f.oneWriteCandidate())
	for name, edit := range map[string]func(*releaseFacts){
		"started":    func(f *releaseFacts) { f.Started = true },
		"not all":    func(f *releaseFacts) { f.All = false },
		"by pin":     func(f *releaseFacts) { f.ByGrant = false },
		"still asks": func(f *releaseFacts) { f.Asks = true },
	} {
		g := f
		edit(&g)
		assert.False(t, g.oneWriteCandidate(), name)
	}
}

func TestDetachMode(t *testing.T) {
	const key = "metallb-iad-0123456789abcdef0123456789abcdef"
	ips := []string{"203.0.113.7"}
	http := []corev1.ServicePort{port(corev1.ProtocolTCP, 80)}
	holding := func(s *corev1.Service) *corev1.Service {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
		return s
	}
	shared := func() *corev1.Service {
		return holding(workload(http, marks.KeySharing, key, marks.KeySharedBy, "ip"))
	}
	for _, tt := range []struct {
		name     string
		svc      *corev1.Service
		key      string
		givingUp bool
		want     string
	}{
		{"holds, shares our key", shared(), key, false, ModeShared},
		{"given up", shared(), key, true, ModeGap},
		{"does not hold the addresses", workload(http, marks.KeySharing, key, marks.KeySharedBy, "ip"), key, false, ModeGap},
		{"the key is not the driver's", holding(workload(http, marks.KeySharing, key)), key, false, ModeGap},
		{"another key than the addresses'", shared(), "metallb-iad-other", false, ModeGap},
		{"cannot share (a port a placeholder uses)", holding(workload([]corev1.ServicePort{port(corev1.ProtocolTCP, 9)},
			marks.KeySharing, key, marks.KeySharedBy, "ip")), key, false, ModeGap},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, DetachMode(tt.svc, ips, tt.key, tt.givingUp))
		})
	}
}

func TestHandedBack(t *testing.T) {
	const phNS = "iad-system"
	web := workload(nil)
	holding := func(ns, name, addrLabel string, ips ...string) corev1.Service {
		s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if addrLabel != "" {
			s.Labels = map[string]string{marks.LabelPlaceholder: names.PlaceholderHold, marks.LabelAddress: addrLabel}
		}
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		return s
	}
	held := func(a *iadv1alpha1.IPAddress, status metav1.ConditionStatus) *iadv1alpha1.IPAddress {
		conditions.Set(&a.Status.Conditions, conditions.Held, status, conditions.ReasonHeldByPlaceholder, "", 1)
		return a
	}
	const addr = "ip-203-0-113-7"
	ph := holding(phNS, "hold-ip-203-0-113-7", addr, "203.0.113.7")
	tests := []struct {
		name    string
		a       *iadv1alpha1.IPAddress
		holders []corev1.Service
		want    bool
	}{
		{"held again, and the cache shows the placeholder holding it", held(address("tenant", "ip", nil), metav1.ConditionTrue),
			[]corev1.Service{*web, ph}, true},
		{"still associated with the Service", held(address("tenant", "ip", &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant", Name: "web"}), metav1.ConditionTrue),
			[]corev1.Service{*web, ph}, false},
		{"associated with another workload now", address("tenant", "ip", &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant", Name: "api"}),
			nil, true},
		{"Held True but the cache does not show the placeholder holding yet", held(address("tenant", "ip", nil), metav1.ConditionTrue),
			[]corev1.Service{*web}, false},
		{"the placeholder holds, but Held is not True yet (a stale view)", held(address("tenant", "ip", nil), metav1.ConditionUnknown),
			[]corev1.Service{*web, ph}, false},
		{"no Held condition yet", address("tenant", "ip", nil), []corev1.Service{*web, ph}, false},
		{"a placeholder of another address does not count", held(address("tenant", "ip", nil), metav1.ConditionTrue),
			[]corev1.Service{*web, holding(phNS, "hold-x", "ip-203-0-113-8", "203.0.113.7")}, false},
		{"a forged placeholder outside the placeholder namespace does not count", held(address("tenant", "ip", nil), metav1.ConditionTrue),
			[]corev1.Service{*web, holding("tenant", "hold-ip-203-0-113-7", addr, "203.0.113.7")}, false},
		{"a placeholder that does not show the IP does not count", held(address("tenant", "ip", nil), metav1.ConditionTrue),
			[]corev1.Service{*web, holding(phNS, "hold-ip-203-0-113-7", addr)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, HandedBack(tt.a, web, tt.holders, phNS))
		})
	}
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
		{"let go in one write: no claim named, no marker, Delete: kept", "-", nil, addr(iadv1alpha1.ReclaimDelete, false), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := annotatedService("tenant", "web", iadv1alpha1.ServiceClaimAnnotation, "ip")
			claimName := "ip"
			switch tt.pinnedBy {
			case "-":
				delete(svc.Annotations, iadv1alpha1.ServiceClaimAnnotation)
				claimName = ""
			case "":
			default:
				svc.Annotations[marks.KeyPinnedBy] = tt.pinnedBy
			}
			s := &scope{svc: svc, marks: marks.Of(svc), claimName: claimName, claim: tt.claim}
			assert.Equal(t, tt.want, s.givingUp([]*iadv1alpha1.IPAddress{tt.a}))
		})
	}
}
