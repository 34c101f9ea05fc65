package service

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
)

func TestPinValue(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want string
	}{
		{"one v4", []string{"203.0.113.7"}, "203.0.113.7"},
		{"v4 before v6", []string{"2001:db8::7", "203.0.113.7"}, "203.0.113.7,2001:db8::7"},
		{"already ordered", []string{"203.0.113.7", "2001:db8::7"}, "203.0.113.7,2001:db8::7"},
		{"canonical v6", []string{"2001:DB8:0:0:0:0:0:7", " 192.0.2.1 "}, "192.0.2.1,2001:db8::7"},
		{"v4-mapped is v4", []string{"::ffff:192.0.2.1", "2001:db8::1"}, "192.0.2.1,2001:db8::1"},
		{"numeric order within a family", []string{"192.0.2.10", "192.0.2.9"}, "192.0.2.9,192.0.2.10"},
		{"duplicates dropped", []string{"192.0.2.1", "192.0.2.1"}, "192.0.2.1"},
		{"garbage dropped", []string{"nope", "192.0.2.1", ""}, "192.0.2.1"},
		{"nothing", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, marks.PinValue(tt.in))
		})
	}
}

func svcWith(policy *corev1.IPFamilyPolicy, fams ...corev1.IPFamily) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilyPolicy: policy, IPFamilies: fams},
	}
}

func TestFamilyMismatch(t *testing.T) {
	single := ptr.To(corev1.IPFamilyPolicySingleStack)
	prefer := ptr.To(corev1.IPFamilyPolicyPreferDualStack)
	requireDual := ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	tests := []struct {
		name     string
		svc      *corev1.Service
		family   iadv1alpha1.IPFamily
		contains string // "" means the claim fits
	}{
		{"v4 on v4", svcWith(single, corev1.IPv4Protocol), iadv1alpha1.FamilyIPv4, ""},
		{"default family is v4", svcWith(nil, corev1.IPv4Protocol), "", ""},
		{"v6 on v6", svcWith(single, corev1.IPv6Protocol), iadv1alpha1.FamilyIPv6, ""},
		{"dual on require dual", svcWith(requireDual, corev1.IPv4Protocol, corev1.IPv6Protocol), iadv1alpha1.FamilyDual, ""},
		{"dual on prefer dual with two families", svcWith(prefer, corev1.IPv6Protocol, corev1.IPv4Protocol), iadv1alpha1.FamilyDual, ""},
		{"dual on single stack", svcWith(single, corev1.IPv4Protocol), iadv1alpha1.FamilyDual, "is Dual (one IPv4 and one IPv6 address) but the Service is single-stack IPv4"},
		{"dual on nil policy, one family", svcWith(nil, corev1.IPv6Protocol), iadv1alpha1.FamilyDual, "single-stack IPv6"},
		{"dual on prefer dual that got one family", svcWith(prefer, corev1.IPv4Protocol), iadv1alpha1.FamilyDual, "single-stack IPv4"},
		{"v6 on v4", svcWith(single, corev1.IPv4Protocol), iadv1alpha1.FamilyIPv6, `holds an IPv6 address but the Service is single-stack IPv4`},
		{"v4 on v6", svcWith(nil, corev1.IPv6Protocol), iadv1alpha1.FamilyIPv4, `holds an IPv4 address but the Service is single-stack IPv6`},
		{"v4 on dual stack", svcWith(requireDual, corev1.IPv4Protocol, corev1.IPv6Protocol), iadv1alpha1.FamilyIPv4, "Service is dual-stack (IPv4, IPv6) and MetalLB needs an address of each family"},
		{"families unknown, dual on single", svcWith(nil), iadv1alpha1.FamilyDual, "single-stack"},
		{"families unknown, v6 fits", svcWith(nil), iadv1alpha1.FamilyIPv6, ""},
		{"families unknown, dual on require dual", svcWith(requireDual), iadv1alpha1.FamilyDual, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FamilyMismatch(tt.svc, "web-ip", tt.family)
			if tt.contains == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tt.contains)
			assert.Contains(t, got, `"web-ip"`)
		})
	}
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

func TestHandPin(t *testing.T) {
	s := func(ann map[string]string, lbIP string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: ann}, Spec: corev1.ServiceSpec{LoadBalancerIP: lbIP}}
	}
	assert.Equal(t, "", marks.Of(s(nil, "")).HandPin())
	assert.Equal(t, "", marks.Of(s(map[string]string{marks.KeyPin: "192.0.2.1", marks.KeyPinnedBy: "ip"}, "")).HandPin(), "ours")
	assert.Equal(t, "192.0.2.1,2001:db8::1", marks.Of(s(map[string]string{marks.KeyPin: "2001:db8::1, 192.0.2.1"}, "")).HandPin())
	assert.Equal(t, "192.0.2.2", marks.Of(s(map[string]string{marks.KeyLegacyPin: "192.0.2.2"}, "")).HandPin())
	assert.Equal(t, "192.0.2.3", marks.Of(s(nil, "192.0.2.3")).HandPin())
	assert.Equal(t, "not-an-ip", marks.Of(s(map[string]string{marks.KeyPin: "not-an-ip"}, "")).HandPin(), "kept as written")
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

func TestDecide(t *testing.T) {
	bound := Situation{Claim: "web-ip", LoadBalancer: true, ClaimFound: true, ClaimPhase: iadv1alpha1.ClaimBound,
		Wanted: 1, Ours: 1, Desired: "203.0.113.7"}
	with := func(f func(*Situation)) Situation { s := bound; f(&s); return s }
	tests := []struct {
		name      string
		in        Situation
		action    Action
		eventType string
		reason    string
		contains  string
	}{
		{"bound claim associates", bound, Associate, "", "", ""},
		{"already associated stays associated", with(func(s *Situation) { s.AssociatedHere = 1 }), Associate, "", "", ""},
		{"no annotation detaches quietly", Situation{LoadBalancer: true}, Detach, "", "", ""},
		{"deletion detaches quietly", with(func(s *Situation) { s.Deleting = true }), Detach, "", "", ""},
		{"not a LoadBalancer", with(func(s *Situation) { s.LoadBalancer = false }), Detach, corev1.EventTypeWarning, ReasonNotLoadBalancer, "not of type LoadBalancer"},
		{"claim missing", with(func(s *Situation) { s.ClaimFound = false }), Detach, corev1.EventTypeWarning, ReasonClaimNotFound, `IPAddressClaim "web-ip" does not exist`},
		{"claim being deleted", with(func(s *Situation) { s.ClaimDeleting = true }), Detach, corev1.EventTypeNormal, ReasonClaimDeleted, "given up"},
		{"family mismatch", with(func(s *Situation) { s.FamilyProblem = "Dual on single" }), Detach, corev1.EventTypeWarning, ReasonFamilyMismatch, "Dual on single"},
		{"claim pending", with(func(s *Situation) { s.ClaimPhase = iadv1alpha1.ClaimPending; s.Ours = 0 }), Detach, corev1.EventTypeNormal, ReasonClaimNotBound, "is Pending, not Bound yet"},
		{"claim without phase", with(func(s *Situation) { s.ClaimPhase = ""; s.Ours = 0 }), Detach, corev1.EventTypeNormal, ReasonClaimNotBound, "is Pending"},
		{"claim lost while attached keeps", with(func(s *Situation) { s.ClaimPhase = iadv1alpha1.ClaimLost; s.AssociatedHere = 1 }), Keep, "", "", ""},
		{"claim of another driver", with(func(s *Situation) { s.Ours = 0; s.Foreign = 1 }), Detach, corev1.EventTypeWarning, ReasonClaimNotServed, "another driver"},
		{"addresses not in the cache yet", with(func(s *Situation) { s.Wanted = 2 }), Keep, "", "", ""},
		{"claimed by another Service", with(func(s *Situation) { s.OtherHolder = "tenant/first" }), Detach, corev1.EventTypeWarning, ReasonClaimAlreadyAssociated, "already attached to Service tenant/first"},
		{"claimed by a Service on its way out", with(func(s *Situation) { s.OtherHolder = "tenant/first"; s.OtherDetaching = true }), Detach, corev1.EventTypeNormal, ReasonWaitingForDetach, "still being detached from Service tenant/first"},
		{"hand pin elsewhere", with(func(s *Situation) { s.HandPin = "192.0.2.1" }), Detach, corev1.EventTypeWarning, ReasonPinnedByHand, "already asks MetalLB for 192.0.2.1"},
		{"hand pin to the same addresses", with(func(s *Situation) { s.HandPin = "203.0.113.7" }), Associate, "", "", ""},
		{"not a LoadBalancer wins over a missing claim", with(func(s *Situation) { s.LoadBalancer = false; s.ClaimFound = false }), Detach, corev1.EventTypeWarning, ReasonNotLoadBalancer, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(tt.in)
			assert.Equal(t, tt.action, v.Action, "action %s", v.Action)
			assert.Equal(t, tt.eventType, v.EventType)
			assert.Equal(t, tt.reason, v.Reason)
			assert.Contains(t, v.Message, tt.contains)
		})
	}
}

func TestHandoffMetrics(t *testing.T) {
	h := newHandoffs()
	now := time.Unix(1000, 0)
	h.now = func() time.Time { return now }
	key := types.NamespacedName{Namespace: "tenant", Name: "web"}
	countOf := func() (uint64, uint64) {
		return histogram(t, handoffSeconds).GetSampleCount(), histogram(t, handoffUnheldSeconds).GetSampleCount()
	}
	c0, u0 := countOf()
	s0, us0 := histogram(t, handoffSeconds).GetSampleSum(), histogram(t, handoffUnheldSeconds).GetSampleSum()

	h.released(key, "u1") // not started: ignored
	h.start(key, "u1")
	now = now.Add(2 * time.Second)
	h.start(key, "u1") // the first sight counts
	h.released(key, "u1")
	now = now.Add(time.Second)
	h.released(key, "u1")
	h.done(key, "u1", ModeGap)
	c1, u1 := countOf()
	assert.Equal(t, c0+1, c1)
	assert.Equal(t, u0+1, u1)
	assert.InDelta(t, 3.0, histogram(t, handoffSeconds).GetSampleSum()-s0, 1e-9, "from the first sight of the request")
	assert.InDelta(t, 1.0, histogram(t, handoffUnheldSeconds).GetSampleSum()-us0, 1e-9, "from the first sight of the release")

	// A shared handoff is measured, but has no unheld gap to observe.
	g0, sh0 := testutil.ToFloat64(handoffsTotal.WithLabelValues(directionAttach, ModeGap)), testutil.ToFloat64(handoffsTotal.WithLabelValues(directionAttach, ModeShared))
	h.start(key, "u3")
	h.released(key, "u3") // a late sight of the release (after the Service held the address)
	now = now.Add(time.Second)
	h.done(key, "u3", ModeShared)
	c3, u3 := countOf()
	assert.Equal(t, c1+1, c3, "the shared handoff is measured")
	assert.Equal(t, u1, u3, "no unheld gap is observed for a shared handoff")
	assert.Equal(t, sh0+1, testutil.ToFloat64(handoffsTotal.WithLabelValues(directionAttach, ModeShared)))
	assert.Equal(t, g0, testutil.ToFloat64(handoffsTotal.WithLabelValues(directionAttach, ModeGap)))
	c1 = c3

	h.done(key, "u1", ModeGap) // not started again: nothing observed
	h.start(key, "u2")
	h.forget(key)
	h.done(key, "u2", ModeGap)
	c2, u2 := countOf()
	assert.Equal(t, c1, c2)
	assert.Equal(t, u1, u2)
}

func histogram(t require.TestingT, h prometheus.Histogram) *dto.Histogram {
	m := &dto.Metric{}
	require.NoError(t, h.Write(m))
	return m.GetHistogram()
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
