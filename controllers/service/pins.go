package service

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/names"
)

// PinAnnotations is what the driver makes of a Service's annotations when
// it pins the Service for claim: the pin and the pinned-by marker and, with
// a key (the shared handoff), the sharing key and the shared-by marker.
// Without a key (the gap handoff) a sharing key the driver wrote earlier is
// withdrawn. The input is not modified.
func PinAnnotations(in map[string]string, claim, pin, key string) map[string]string {
	out := binding.CloneAnnotations(in)
	out[names.MetalLBLoadBalancerIPs] = pin
	out[names.AnnotationPinnedBy] = claim
	if key != "" {
		out[names.MetalLBAllowSharedIP] = key
		out[names.AnnotationSharedBy] = claim
	} else {
		binding.WithdrawKey(out)
	}
	return out
}

// ReleaseStarted reports whether the release of a Service's addresses has
// been written: with a release pin, the pin is that value; with the grant
// (release empty), neither the pin nor the grant label is left.
func ReleaseStarted(svc *corev1.Service, release string) bool {
	if release != "" {
		return svc.Annotations[names.MetalLBLoadBalancerIPs] == release
	}
	_, pinned := svc.Annotations[names.MetalLBLoadBalancerIPs]
	_, granted := svc.Labels[names.LabelGrant]
	return !pinned && !granted
}

// PinValue renders IPs as a metallb.io/loadBalancerIPs value: canonical
// forms, IPv4 before IPv6, ascending within a family, no duplicates,
// comma-separated. Text that does not parse is dropped.
func PinValue(ips []string) string {
	var parsed []netip.Addr
	for _, s := range ips {
		ip, err := names.ParseAddress(s)
		if err != nil {
			continue
		}
		parsed = append(parsed, ip)
	}
	// netip orders IPv4 before IPv6, and numerically within a family.
	slices.SortFunc(parsed, func(a, b netip.Addr) int { return a.Compare(b) })
	parsed = slices.Compact(parsed)
	out := make([]string, len(parsed))
	for i, ip := range parsed {
		out[i] = ip.String()
	}
	return strings.Join(out, ",")
}

// HandPin returns the MetalLB pin a Service carries without the driver's
// authorship marker (metallb.io/loadBalancerIPs, its legacy twin, or
// spec.loadBalancerIP), canonicalised with PinValue; "" when the Service
// carries none or the driver wrote it.
func HandPin(svc *corev1.Service) string {
	if _, ours := svc.Annotations[names.AnnotationPinnedBy]; ours {
		return ""
	}
	for _, v := range []string{
		svc.Annotations[names.MetalLBLoadBalancerIPs],
		svc.Annotations[legacyLoadBalancerIPs],
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

// legacyLoadBalancerIPs is MetalLB's deprecated spelling of the pin annotation.
const legacyLoadBalancerIPs = "metallb.universe.tf/loadBalancerIPs"

// addressIPs returns the canonical IPs of addresses.
func addressIPs(addrs []*iadv1alpha1.IPAddress) []string {
	var out []string
	for _, a := range addrs {
		if ip, err := names.ParseAddress(a.Spec.Address); err == nil {
			out = append(out, ip.String())
		}
	}
	return out
}
