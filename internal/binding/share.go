package binding

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// ShapeProblem explains why, by its shape alone, a Service cannot share an
// address with a placeholder under MetalLB's (v0.15) rules (same backend
// key, no overlapping port); "" when it can.
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

// ServiceShareProblem adds to ShapeProblem the driver's own rule: it keys
// and pins only a Service with no key or pin of its own. Both the Service
// and IPAddress controllers ask it before the shared handoff, so they agree.
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

// SharesOurKey reports whether the driver wrote the Service's sharing key.
func SharesOurKey(svc *corev1.Service) bool {
	_, ok := svc.Annotations[names.AnnotationSharedBy]
	return ok
}

// SharesHold reports whether svc, the attached Service, shares the address
// with its hold placeholder: the driver's pin and the address's key, both
// marked, no legacy key, a shape MetalLB lets share. Otherwise (the gap
// handoff) the placeholder lets go.
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
