// Package placeholder renders what every placeholder Service shares,
// whichever controller creates it: its name, and a spec selectorless (no
// endpoints, so MetalLB never announces it), LoadBalancer without node
// ports, single-stack.
package placeholder

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// Port is the one port a placeholder declares, since a Service needs one;
// nothing listens on it.
func Port() corev1.ServicePort {
	return corev1.ServicePort{Name: "hold", Protocol: corev1.ProtocolTCP, Port: 9, TargetPort: intstr.FromInt32(9)}
}

// Spec is the spec of a placeholder of one family.
func Spec(family corev1.IPFamily) corev1.ServiceSpec {
	return corev1.ServiceSpec{
		Type:                          corev1.ServiceTypeLoadBalancer,
		AllocateLoadBalancerNodePorts: ptr.To(false),
		IPFamilies:                    []corev1.IPFamily{family},
		IPFamilyPolicy:                ptr.To(corev1.IPFamilyPolicySingleStack),
		Ports:                         []corev1.ServicePort{Port()},
	}
}

// OwnerRef hands a placeholder to the IPAddress it holds, non-controller
// and non-blocking, so the garbage collector removes a placeholder the
// finalizer missed.
func OwnerRef(a *iadv1alpha1.IPAddress) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         iadv1alpha1.GroupVersion.String(),
		Kind:               "IPAddress",
		Name:               a.Name,
		UID:                a.UID,
		Controller:         ptr.To(false),
		BlockOwnerDeletion: ptr.To(false),
	}
}

// AllocationName is the placeholder drawing a claim's address of
// one family; deterministic, so racing reconciles collide on create instead
// of allocating twice.
func AllocationName(claimUID types.UID, family string) string {
	return "alloc-" + strings.ToLower(family) + "-" + string(claimUID)
}

// HoldName is "hold-" and the address name, or a hash of the name
// where that would not be a valid DNS-1035 label (long or dotted names).
func HoldName(addressName string) string {
	n := "hold-" + addressName
	if len(validation.IsDNS1035Label(n)) == 0 {
		return n
	}
	sum := sha256.Sum256([]byte(addressName))
	return "hold-" + hex.EncodeToString(sum[:])[:40]
}

// OwnedByAddress reports whether a placeholder carries an owner reference
// to an IPAddress; name "" matches any.
func OwnedByAddress(svc *corev1.Service, name string) bool {
	for _, o := range svc.OwnerReferences {
		if o.Kind == "IPAddress" && o.APIVersion == iadv1alpha1.GroupVersion.String() && (name == "" || o.Name == name) {
			return true
		}
	}
	return false
}
