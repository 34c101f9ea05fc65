package service

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/names"
)

// PinAnnotations is a copy of a Service's annotations pinned for claim:
// the pin and the pinned-by marker and, with a key, the sharing key and
// the shared-by marker; without one, the driver's key is withdrawn.
func PinAnnotations(in map[string]string, claim, pin, key string) map[string]string {
	out := binding.CloneAnnotations(in)
	binding.TakeOverPool(out)
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
