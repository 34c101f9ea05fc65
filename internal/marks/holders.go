package marks

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// Exempt reports whether a Service is one of the driver's placeholders,
// which conflict detection leaves alone: labelled as a placeholder AND in
// the placeholder namespace. Either alone proves nothing: anyone who can
// write a Service can forge the label, and an administrator can put a
// Service in the namespace.
func Exempt(svc *corev1.Service, placeholderNamespace string) bool {
	_, labelled := svc.Labels[LabelPlaceholder]
	return labelled && placeholderNamespace != "" && svc.Namespace == placeholderNamespace
}

// IngressIPs returns the canonical IPs MetalLB assigned the Service; entries
// that are not IPs are skipped.
func IngressIPs(svc *corev1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if ip, err := names.ParseAddress(in.IP); err == nil {
			out = append(out, ip.String())
		}
	}
	return out
}

// Holds reports whether the Service's ingress shows any of the canonical ips.
func Holds(svc *corev1.Service, ips ...string) bool {
	in := IngressIPs(svc)
	return slices.ContainsFunc(ips, func(ip string) bool { return slices.Contains(in, ip) })
}

// HoldsAll reports whether the ingress shows every one of the canonical ips,
// and there is at least one.
func HoldsAll(svc *corev1.Service, ips ...string) bool {
	in := IngressIPs(svc)
	return len(ips) > 0 && !slices.ContainsFunc(ips, func(ip string) bool { return !slices.Contains(in, ip) })
}

// OneOf reports whether svc is one of svcs, by namespace and name.
func OneOf(svc *corev1.Service, svcs []corev1.Service) bool {
	return slices.ContainsFunc(svcs, func(o corev1.Service) bool { return o.Namespace == svc.Namespace && o.Name == svc.Name })
}

// HandingBack reports whether svc, holding the unattached address a, hands
// it back in the shared handoff: not one of a's placeholders, carrying
// exactly its sharing key, and authorized by its binding.
func HandingBack(a *iadv1alpha1.IPAddress, key string, svc *corev1.Service, placeholders []corev1.Service) bool {
	if a.Status.AssociatedTo != nil || OneOf(svc, placeholders) {
		return false
	}
	return Of(svc).KeyedExactly(key) && Authorizes(a, svc)
}
