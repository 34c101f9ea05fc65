package binding

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/metallb-iad/internal/names"
)

// Exempt reports whether a Service is one of the driver's own placeholders,
// which conflict detection leaves alone: labelled as a placeholder AND
// inside the placeholder namespace, which tenants cannot write to. The
// label alone proves nothing (anyone who can write a Service can forge
// it); the namespace alone takes in a Service an administrator put there,
// which the driver did not create and which is as unauthorized as any
// other. Every placeholder the driver creates (allocation, warm, hold) has
// both, and keeps both for its whole life.
func Exempt(svc *corev1.Service, placeholderNamespace string) bool {
	_, labelled := svc.Labels[names.LabelPlaceholder]
	return labelled && placeholderNamespace != "" && svc.Namespace == placeholderNamespace
}

// IngressIPs returns the canonical IPs of a Service's load-balancer
// ingress, what MetalLB assigned it; entries that are not IPs are skipped.
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

// HoldsAll reports whether the Service's ingress shows every one of the
// canonical ips, and there is at least one.
func HoldsAll(svc *corev1.Service, ips ...string) bool {
	in := IngressIPs(svc)
	return len(ips) > 0 && !slices.ContainsFunc(ips, func(ip string) bool { return !slices.Contains(in, ip) })
}
