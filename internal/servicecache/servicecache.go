// Package servicecache holds the one cache transform for Services, so that
// controllers caching every Service of the cluster keep only what they read.
package servicecache

import (
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/internal/compact"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// Options are the cache options of the Service and IPAddress controllers.
// They must see Services in every namespace, so the cache trims each
// (Trim) instead of narrowing by namespace; IPAddressPools are read only in
// metallbNamespace.
func Options(metallbNamespace string) map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Service{}:               {Transform: Trim},
		&metallbv1beta1.IPAddressPool{}: {Namespaces: map[string]cache.Config{metallbNamespace: {}}},
	}
}

// Trim keeps only what the controllers read of a Service, kubectl's
// last-applied copy dropped and the keys of its labels and annotations
// shared (compact.Keys); the ports and traffic policy decide sharing,
// the families the release pin. Safe only because the controllers never
// write a whole Service back, only patches: code reading this cache must
// keep it so. Anything but a Service is returned as it is.
func Trim(o any) (any, error) {
	svc, ok := o.(*corev1.Service)
	if !ok {
		return o, nil
	}
	ann := compact.Keys(svc.Annotations) // a new map: safe to drop from
	delete(ann, marks.KeyLastApplied)
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
			Labels:            compact.Keys(svc.Labels),
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
			LoadBalancerClass:     svc.Spec.LoadBalancerClass,
			Ports:                 ports,
			ExternalTrafficPolicy: svc.Spec.ExternalTrafficPolicy,
		},
		Status: corev1.ServiceStatus{LoadBalancer: svc.Status.LoadBalancer},
	}, nil
}
