package binding

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/metallb-iad/internal/names"
)

// PinValue renders IPs as a metallb.io/loadBalancerIPs value in one
// canonical order (IPv4 first, ascending, deduplicated), so equal pins
// compare equal. Text that does not parse is dropped.
func PinValue(ips []string) string {
	var parsed []netip.Addr
	for _, s := range ips {
		ip, err := names.ParseAddress(s)
		if err != nil {
			continue
		}
		parsed = append(parsed, ip)
	}
	slices.SortFunc(parsed, func(a, b netip.Addr) int { return a.Compare(b) })
	parsed = slices.Compact(parsed)
	out := make([]string, len(parsed))
	for i, ip := range parsed {
		out[i] = ip.String()
	}
	return strings.Join(out, ",")
}

// HandPin returns the MetalLB pin a Service carries without the driver's
// marker (either annotation spelling, or spec.loadBalancerIP), canonical
// when it parses; "" when there is none or the driver wrote it.
func HandPin(svc *corev1.Service) string {
	if _, ours := svc.Annotations[names.AnnotationPinnedBy]; ours {
		return ""
	}
	for _, v := range []string{
		svc.Annotations[names.MetalLBLoadBalancerIPs],
		svc.Annotations[names.MetalLBLegacyLoadBalancerIPs],
		svc.Spec.LoadBalancerIP,
	} {
		if strings.TrimSpace(v) != "" {
			if p := PinValue(strings.Split(v, ",")); p != "" {
				return p
			}
			return v
		}
	}
	return ""
}
