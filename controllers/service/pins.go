package service

import (
	"fmt"

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

// ReasonPoolRequestTakenOver (Normal, on the Service): the driver removed the
// Service's own MetalLB pool request in the same write as its pin.
const ReasonPoolRequestTakenOver = "PoolRequestTakenOver"

func msgPoolRequestTakenOver(took, pin string) string {
	return fmt.Sprintf("Removed %s in the same write as the driver's pin to %s: MetalLB refuses a pin to an address the named pool does not hold, "+
		"so the request would take the address away as soon as that pool changes; the old value is kept in annotation %s",
		took, pin, names.AnnotationOwnerPool)
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
