package service

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

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

func TestOtherClass(t *testing.T) {
	svc := func(class string) *corev1.Service {
		s := &corev1.Service{}
		if class != "" {
			s.Spec.LoadBalancerClass = &class
		}
		return s
	}
	for _, tc := range []struct{ svc, metallb, want string }{
		{"", "", ""},
		{"example.com/lb", "", "example.com/lb"},
		{"", "metallb.io/lb", "(none)"},
		{"metallb.io/lb", "metallb.io/lb", ""},
	} {
		assert.Equal(t, tc.want, otherClass(svc(tc.svc), tc.metallb), "Service class %q, MetalLB's %q", tc.svc, tc.metallb)
	}
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
		{"a malformed claim name: refused, quoted in part", with(func(s *Situation) {
			s.Claim, s.ClaimNameProblem = strings.Repeat("X", 300_000), "a lowercase RFC 1123 subdomain must consist of ..."
		}), Detach, corev1.EventTypeWarning, ReasonClaimNameInvalid, "(300000 bytes)"},
		{"a malformed claim name wins over not a LoadBalancer", with(func(s *Situation) {
			s.Claim, s.ClaimNameProblem, s.LoadBalancer = "Web_IP", "invalid", false
		}), Detach, corev1.EventTypeWarning, ReasonClaimNameInvalid, `names "Web_IP"`},
		{"a class that does not admit the namespace: not attached", with(func(s *Situation) { s.NotAdmittedBy = "public" }),
			Detach, corev1.EventTypeWarning, ReasonNamespaceNotAdmitted, `IPAddressClass "public", which does not admit this namespace`},
		{"an attachment made while admitted is kept", with(func(s *Situation) { s.NotAdmittedBy = "public"; s.AssociatedHere = 1 }), Associate, "", "", ""},
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
		{"a Gateway's Service in the implementation's namespace", with(func(s *Situation) { s.ForeignGateway = "serves Gateway team-a/web" }), Detach, corev1.EventTypeWarning, ReasonGatewayInOtherNamespace, `Service serves Gateway team-a/web, so claim "web-ip" of this namespace is not attached`},
		{"a foreign Gateway wins over a missing claim", with(func(s *Situation) { s.ForeignGateway = "serves Gateway team-a/web"; s.ClaimFound = false }), Detach, corev1.EventTypeWarning, ReasonGatewayInOtherNamespace, ""},
		{"another load balancer's class: refused, told which MetalLB serves", with(func(s *Situation) { s.OtherClass = "gateway.nginx.org/nginx-gateway-controller" }),
			Detach, corev1.EventTypeWarning, ReasonOtherLoadBalancerClass, `spec.loadBalancerClass is "gateway.nginx.org/nginx-gateway-controller", and MetalLB serves only the Services without a spec.loadBalancerClass`},
		{"no class where MetalLB serves one", with(func(s *Situation) { s.OtherClass, s.MetalLBClass = "(none)", "metallb.io/lb" }),
			Detach, corev1.EventTypeWarning, ReasonOtherLoadBalancerClass, `spec.loadBalancerClass is unset, and MetalLB serves only the Services of spec.loadBalancerClass "metallb.io/lb"`},
		{"a Gateway's companion Service, not a LoadBalancer: detached, nothing told",
			with(func(s *Situation) { s.LoadBalancer = false; s.GatewayCompanion = true }), Detach, "", "", ""},
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
	assert.NotEmpty(t, Decide(with(func(s *Situation) { s.Wanted = 2 })).Wait,
		"a Keep for addresses the cache does not show yet names what it waits for")
	assert.Empty(t, Decide(with(func(s *Situation) { s.ClaimPhase = iadv1alpha1.ClaimLost; s.AssociatedHere = 1 })).Wait,
		"a Keep of an attachment whose claim is no longer Bound waits for nothing")
	assert.Empty(t, Decide(bound).Wait)
}
