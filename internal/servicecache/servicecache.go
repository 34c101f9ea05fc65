// Package servicecache holds the one cache transform for Services, shared
// by the controllers that cache every Service of the cluster (the Service
// and the IPAddress controller) and by the claim controller for its
// placeholders: the cache keeps only what they read, so a cluster with many
// Services costs them little memory.
package servicecache

import (
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

// lastApplied is kubectl's copy of the applied manifest, often the largest
// annotation on a Service; no controller reads it.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Options are the cache options of the Service and the IPAddress
// controller, which both binaries and the tests build their manager with.
// They see Services in every namespace (a workload named by associatedTo,
// and any Service holding or pinned to an address), so Services are not
// narrowed by namespace; instead the cache keeps of each only what the
// controllers read (Trim). Code reading Services from this cache must
// therefore never write a whole Service back; it only patches. MetalLB's
// IPAddressPools are read only in the MetalLB namespace.
func Options(o *bootstrap.Options) map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Service{}:               {Transform: Trim},
		&metallbv1beta1.IPAddressPool{}: {Namespaces: map[string]cache.Config{o.MetalLBNamespace: {}}},
	}
}

// Trim is a cache transform that keeps only what the controllers read of a
// Service: identity, labels, annotations (without kubectl's last-applied
// copy), owner references (a hold placeholder is owned by its address),
// finalizers, deletion, type, IP families and policy, cluster IPs,
// spec.loadBalancerIP, the ports' names, protocols and numbers, the
// external traffic policy (both decide whether the Service can share an
// address with a placeholder; the families also decide the release pin)
// and the load-balancer status. The controllers only ever patch Services,
// from a copy of what the cache holds, so the fields dropped here are never
// written back. Anything but a Service is returned as it is.
func Trim(o any) (any, error) {
	svc, ok := o.(*corev1.Service)
	if !ok {
		return o, nil
	}
	ann := svc.Annotations
	if _, ok := ann[lastApplied]; ok {
		ann = make(map[string]string, len(svc.Annotations))
		for k, v := range svc.Annotations {
			if k != lastApplied {
				ann[k] = v
			}
		}
	}
	var ports []corev1.ServicePort
	if len(svc.Spec.Ports) > 0 {
		ports = make([]corev1.ServicePort, len(svc.Spec.Ports))
		for i, p := range svc.Spec.Ports {
			ports[i] = corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port}
		}
	}
	return &corev1.Service{
		TypeMeta: svc.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              svc.Name,
			Namespace:         svc.Namespace,
			UID:               svc.UID,
			ResourceVersion:   svc.ResourceVersion,
			Generation:        svc.Generation,
			CreationTimestamp: svc.CreationTimestamp,
			DeletionTimestamp: svc.DeletionTimestamp,
			Labels:            svc.Labels,
			Annotations:       ann,
			OwnerReferences:   svc.OwnerReferences,
			Finalizers:        svc.Finalizers,
		},
		Spec: corev1.ServiceSpec{
			Type:                  svc.Spec.Type,
			ClusterIP:             svc.Spec.ClusterIP,
			ClusterIPs:            svc.Spec.ClusterIPs,
			IPFamilies:            svc.Spec.IPFamilies,
			IPFamilyPolicy:        svc.Spec.IPFamilyPolicy,
			LoadBalancerIP:        svc.Spec.LoadBalancerIP,
			Ports:                 ports,
			ExternalTrafficPolicy: svc.Spec.ExternalTrafficPolicy,
		},
		Status: corev1.ServiceStatus{LoadBalancer: svc.Status.LoadBalancer},
	}, nil
}
