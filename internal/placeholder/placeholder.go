// Package placeholder renders the parts every placeholder Service shares,
// whichever controller creates it: the claim controller's allocation
// placeholders and the IPAddress controller's hold placeholders. A
// placeholder is selectorless (no endpoints, so MetalLB never announces
// it), type LoadBalancer without node ports, and single-stack.
package placeholder

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// Port is the one port a placeholder declares: a Service needs at least one.
// Nothing listens on it; having no endpoints, the placeholder is never
// announced.
var Port = corev1.ServicePort{
	Name:       "hold",
	Protocol:   corev1.ProtocolTCP,
	Port:       9,
	TargetPort: intstr.FromInt32(9),
}

// Spec is the spec of a placeholder of one family.
func Spec(family corev1.IPFamily) corev1.ServiceSpec {
	return corev1.ServiceSpec{
		Type:                          corev1.ServiceTypeLoadBalancer,
		AllocateLoadBalancerNodePorts: ptr.To(false),
		IPFamilies:                    []corev1.IPFamily{family},
		IPFamilyPolicy:                ptr.To(corev1.IPFamilyPolicySingleStack),
		Ports:                         []corev1.ServicePort{Port},
	}
}

// OwnerRef is the non-controller, non-blocking owner reference that hands a
// placeholder to the IPAddress it holds: deleting the address lets the
// garbage collector remove a placeholder the driver's finalizer missed.
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
