package main

import (
	"context"
	"fmt"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// before sets up the cluster as it was before the driver: MetalLB's own
// pool legacy and a plain LoadBalancer Service that MetalLB gave an address
// from it. It returns that address.
func before(ctx context.Context, k client.Client, c *cluster.Cluster) (string, error) {
	step("Before the driver: MetalLB serves its own pool '%s' (%s), and Service %s/%s, a plain LoadBalancer Service, uses it",
		legacyPool, legacyRange, legacyNamespace, legacyService)
	pool := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: legacyPool},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{legacyRange}},
	}
	if err := k.Create(ctx, pool); err != nil {
		return "", err
	}
	if err := c.EnsureNamespace(ctx, legacyNamespace); err != nil {
		return "", err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: legacyNamespace, Name: legacyService},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	if err := k.Create(ctx, svc); err != nil {
		return "", err
	}
	var ip string
	if err := waitFor(ctx, "MetalLB assigns Service "+legacyService+" an address", func() (bool, error) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return false, err
		}
		if ips := ingressIPs(svc); len(ips) == 1 {
			ip = ips[0]
			return true, nil
		}
		return false, nil
	}); err != nil {
		return "", err
	}
	say("Service %s/%s got %s from pool %s: no claim, no annotation, nothing of the driver's", legacyNamespace, legacyService, ip, legacyPool)
	return ip, nil
}

// adopt waits until the service controller has imported the legacy
// Service's address into a generated claim and an IPAddress attached to the
// Service, then retires the legacy pool, so MetalLB serves the range from
// the class's pool, and checks the Service kept its address throughout.
func adopt(ctx context.Context, k client.Client, ip string) error {
	step("The driver adopts %s/%s: a generated claim, an IPAddress attached to the Service, and the Service keeps %s",
		legacyNamespace, legacyService, ip)
	svc := &corev1.Service{}
	if err := k.Get(ctx, client.ObjectKey{Namespace: legacyNamespace, Name: legacyService}, svc); err != nil {
		return err
	}
	claimName := names.ImportedClaimName(svc.Name, svc.UID)
	addr, err := names.ParseAddress(ip)
	if err != nil {
		return err
	}
	addrName, err := names.AddressName(addr)
	if err != nil {
		return err
	}
	claim := &iadv1alpha1.IPAddressClaim{}
	a := &iadv1alpha1.IPAddress{}
	if err := waitFor(ctx, "the address of "+legacyService+" is imported", func() (bool, error) {
		if err := k.Get(ctx, client.ObjectKey{Namespace: legacyNamespace, Name: claimName}, claim); err != nil {
			return false, err
		}
		if err := k.Get(ctx, client.ObjectKey{Name: addrName}, a); err != nil {
			return false, err
		}
		if err := k.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return false, err
		}
		at := a.Status.AssociatedTo
		return claim.Status.Phase == iadv1alpha1.ClaimBound && a.Status.Phase == iadv1alpha1.AddressBound &&
			at != nil && at.Namespace == legacyNamespace && at.Name == legacyService &&
			svc.Annotations[iadv1alpha1.ServiceClaimAnnotation] == claimName, nil
	}); err != nil {
		return err
	}
	if !hasIngress(svc, ip) {
		return fmt.Errorf("service %s/%s lost %s during its import", legacyNamespace, legacyService, ip)
	}
	say("claim %s/%s generated (label %s=%s), Bound to IPAddress %s (%s, spec.addressName %s)",
		legacyNamespace, claimName, marks.LabelImported, claim.Labels[marks.LabelImported], addrName, ip, claim.Spec.AddressName)
	say("IPAddress %s: phase %s, reclaim policy %s, attached to %s/%s", addrName, a.Status.Phase, a.Spec.ReclaimPolicy, legacyNamespace, legacyService)
	say("Service %s/%s still holds %s, now annotated %s: %s and pinned by the driver (%s=%s)",
		legacyNamespace, legacyService, ip, iadv1alpha1.ServiceClaimAnnotation, claimName,
		marks.KeyPin, svc.Annotations[marks.KeyPin])

	step("The admin retires pool '%s': MetalLB loads %s, and %s/%s keeps %s", legacyPool, names.PoolName("public"), legacyNamespace, legacyService, ip)
	if err := k.Delete(ctx, &metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: legacyPool}}); err != nil {
		return err
	}
	pool := &metallbv1beta1.IPAddressPool{}
	if err := waitFor(ctx, "MetalLB serves the range from "+names.PoolName("public"), func() (bool, error) {
		if err := k.Get(ctx, client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: names.PoolName("public")}, pool); err != nil {
			return false, err
		}
		err := k.Get(ctx, client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: legacyPool}, &metallbv1beta1.IPAddressPool{})
		return apierrors.IsNotFound(err) && pool.Status.AssignedIPv4 >= 1, nil
	}); err != nil {
		return err
	}
	if err := k.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
		return err
	}
	if !hasIngress(svc, ip) {
		return fmt.Errorf("service %s/%s lost %s when pool %s was retired", legacyNamespace, legacyService, ip, legacyPool)
	}
	say("pool %s reports %d IPv4 address assigned; %s/%s still holds %s", names.PoolName("public"), pool.Status.AssignedIPv4, legacyNamespace, legacyService, ip)
	return nil
}
