package binding

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// ShapeProblem explains why, by its shape alone, a Service cannot share an
// address with a placeholder under MetalLB's (v0.15) rules; "" when it can.
// MetalLB lets Services share an address only when their backend keys agree
// (empty for externalTrafficPolicy Cluster, the selector for Local; the
// placeholder is selectorless with policy Cluster) and their ports
// (protocol and number) do not overlap (the placeholder declares
// placeholder.Port).
func ShapeProblem(svc *corev1.Service) string {
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		return "the Service's externalTrafficPolicy is Local, and MetalLB shares an address only between Services with the same backends (the placeholder has none)"
	}
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if proto == placeholder.Port.Protocol && p.Port == placeholder.Port.Port {
			return fmt.Sprintf("the Service uses port %d/%s, which the placeholder holding the address uses too", p.Port, proto)
		}
	}
	return ""
}

// ServiceShareProblem explains why a Service cannot share a claim's
// addresses with their placeholders; "" when it can. On top of MetalLB's
// rules (ShapeProblem) the driver only writes its key on a Service that
// carries no sharing key of its own, and only pins a Service that carries
// no pin of its own (HandPin). The Service controller asks it before the
// shared handoff, and the IPAddress controller before it gives the hold
// placeholder the claim's key for that handoff, so both agree.
func ServiceShareProblem(svc *corev1.Service) string {
	if p := HandPin(svc); p != "" {
		return fmt.Sprintf("the Service carries its own MetalLB pin (%s)", p)
	}
	if v, ok := svc.Annotations[names.MetalLBLegacyAllowSharedIP]; ok {
		return fmt.Sprintf("the Service carries its own %s (%q)", names.MetalLBLegacyAllowSharedIP, v)
	}
	if v, ok := svc.Annotations[names.MetalLBAllowSharedIP]; ok && !SharesOurKey(svc) {
		return fmt.Sprintf("the Service carries its own %s (%q)", names.MetalLBAllowSharedIP, v)
	}
	return ShapeProblem(svc)
}

// SharesOurKey reports whether the Service's metallb.io/allow-shared-ip was
// written by the driver: the shared-by marker is present.
func SharesOurKey(svc *corev1.Service) bool {
	_, ok := svc.Annotations[names.AnnotationSharedBy]
	return ok
}

// SharesHold reports whether svc, the Service the address is attached to,
// is in a shared attachment: it carries the driver's pin and sharing key
// (both authorship markers) with exactly the address's key, no sharing key
// of its own in the legacy spelling, and nothing in its shape keeps MetalLB
// from letting it share the address with the address's hold placeholder
// (ShapeProblem). The hold placeholder then stays for the whole
// attachment, both holding the address; otherwise (the gap handoff) the
// placeholder lets go. The Service controller writes the key only on a
// Service that passes the same checks, and withdraws it from one that
// stops passing them.
func SharesHold(a *iadv1alpha1.IPAddress, svc *corev1.Service) bool {
	if svc == nil || svc.DeletionTimestamp != nil {
		return false
	}
	_, pinned := svc.Annotations[names.AnnotationPinnedBy]
	_, shared := svc.Annotations[names.AnnotationSharedBy]
	_, legacy := svc.Annotations[names.MetalLBLegacyAllowSharedIP]
	key, ok := svc.Annotations[names.MetalLBAllowSharedIP]
	return pinned && shared && !legacy && ok && key != "" && key == SharingKey(a) && ShapeProblem(svc) == ""
}
