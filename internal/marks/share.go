package marks

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// shapeProblem explains why, by its shape alone, a Service cannot share an
// address with a placeholder under MetalLB's (v0.15) rules (same backend
// key, no overlapping port); "" when it can.
func shapeProblem(svc *corev1.Service) string {
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		return "the Service's externalTrafficPolicy is Local, and MetalLB shares an address only between Services with the same backends (the placeholder has none)"
	}
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if hold := placeholder.Port(); proto == hold.Protocol && p.Port == hold.Port {
			return fmt.Sprintf("the Service uses port %d/%s, which the placeholder holding the address uses too", p.Port, proto)
		}
	}
	return ""
}

// ServiceShareProblem adds to shapeProblem the driver's own rule: it keys
// and pins only a Service with no key or pin of its own. Both the Service
// and IPAddress controllers ask it before the shared handoff, so they agree.
func ServiceShareProblem(svc *corev1.Service) string {
	m := Of(svc)
	if p := m.HandPin(); p != "" {
		return fmt.Sprintf("the Service carries its own MetalLB pin (%s)", p)
	}
	if m.ownLegacySharing {
		return fmt.Sprintf("the Service carries its own %s (%q)", KeyLegacySharing, m.LegacySharing)
	}
	if m.ownSharing && !m.SharesOurKey() {
		return fmt.Sprintf("the Service carries its own %s (%q)", KeySharing, m.Sharing)
	}
	return shapeProblem(svc)
}

// SharesHold reports whether svc, the attached Service, shares the address
// whose sharing key is key with its hold placeholder: the driver's pin and
// that key, both marked, no legacy key, a shape MetalLB lets share.
// Otherwise (the gap handoff) the placeholder lets go.
func SharesHold(svc *corev1.Service, key string) bool {
	if svc == nil || svc.DeletionTimestamp != nil {
		return false
	}
	m := Of(svc)
	return m.PinnedBy != "" && m.SharesOurKey() && key != "" && m.KeyedExactly(key) && shapeProblem(svc) == ""
}

// PairKey is the sharing key a shared attachment is held under: key, or,
// when svc already shares all of ips under another key the driver wrote
// (the secret rotated since it attached), that one. The pair keeps it until
// the Service lets the addresses go: MetalLB drops a sharer whose key
// changes while the other still holds the address under the old one, and
// shows no moment at which a deleted hold has left its books, so neither
// side can be re-keyed first without a refusal. A hold alone on its address
// (unattached, or once the Service let go) is re-stamped at once.
func PairKey(svc *corev1.Service, key string, ips ...string) string {
	if svc == nil || svc.DeletionTimestamp != nil {
		return key
	}
	m := Of(svc)
	if m.PinnedBy != "" && m.SharesOurKey() && m.Sharing != "" && m.Sharing != key && HoldsAll(svc, ips...) && shapeProblem(svc) == "" {
		return m.Sharing
	}
	return key
}
