// Package placeholder renders what every placeholder Service shares,
// whichever controller creates it: selectorless (no endpoints, so MetalLB
// never announces it), LoadBalancer without node ports, single-stack.
package placeholder

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// Port is the one port a placeholder declares, since a Service needs one;
// nothing listens on it.
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
