package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/service"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// The feature `tenancy`: what a tenant with edit rights in one namespace
// can write does not reach another namespace's addresses or Events.

// TestForgedGatewayLabels: the labels that name a Gateway are read only as
// far as the Service's own namespace.
//
//   - In Envoy Gateway's merged mode one Service in the implementation's
//     namespace serves every Gateway of a class, and a tenant's
//     spec.infrastructure.labels reach it: labels naming a Gateway "in"
//     that namespace, beside the class label the implementation writes.
//     The Service here stands for that write (the implementation's, in
//     the administrator's namespace, with the tenant's labels and claim
//     annotation). It must not take the administrator's Bound claim there.
//   - A tenant's own Service labelled as serving a Gateway of another
//     namespace says so on the Service, and writes no Event there.
func TestForgedGatewayLabels(t *testing.T) {
	story(t, "tenancy", "labels a tenant can write name no Gateway outside the Service's namespace", "tenancy-forged", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.class("e2e-tenancy-forged", iadv1alpha1.ReclaimDelete, "192.0.2.128/29")
		admin := newKit(ctx, t, cfg, "tenancy-forged-admin")
		theirs := admin.heldClaim("admin-ip", "e2e-tenancy-forged")

		merged := lbServiceWith(admin.ns, "envoy-merged", map[string]string{
			marks.LabelOwningGatewayClass:     "eg",
			marks.LabelOwningGatewayName:      "tenant-gw",
			marks.LabelOwningGatewayNamespace: admin.ns,
		}, "admin-ip")
		require.NoError(t, k.k.Create(ctx, merged))
		forged := lbServiceWith(k.ns, "web", map[string]string{
			marks.LabelOwningGatewayName:      "prod-gw",
			marks.LabelOwningGatewayNamespace: admin.ns,
		}, "web-ip")
		require.NoError(t, k.k.Create(ctx, forged))

		require.EventuallyWithT(t, func(c *assert.CollectT) {
			admin.assertEvent(c, "Service", admin.ns, merged.Name, corev1.EventTypeWarning, service.ReasonGatewayInOtherNamespace,
				"serves every Gateway of GatewayClass eg")
			k.assertEvent(c, "Service", k.ns, forged.Name, corev1.EventTypeWarning, service.ReasonGatewayInOtherNamespace,
				"serves Gateway "+admin.ns+"/prod-gw")
		}, wait, tick, "both Services are refused, and told why")

		// A moment later nothing moved: the administrator's address is held
		// and attached to nothing, and no Event names a Gateway there.
		time.Sleep(2 * time.Second)
		admin.held(theirs, iadv1alpha1.AddressBound)
		assert.Nil(t, admin.address(theirs.Name).Status.AssociatedTo, "the administrator's address is attached to nothing")
		svc := &corev1.Service{}
		require.NoError(t, k.k.Get(ctx, client.ObjectKeyFromObject(merged), svc))
		assert.NotContains(t, svc.Annotations, marks.KeyPin, "the merged Service is not pinned")
		list := &corev1.EventList{}
		require.NoError(t, k.k.List(ctx, list, client.InNamespace(admin.ns)))
		for _, e := range list.Items {
			assert.NotEqual(t, "Gateway", e.InvolvedObject.Kind, "an Event about Gateway %s/%s: %s", e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message)
		}

		require.NoError(t, k.k.Delete(ctx, merged))
		require.NoError(t, k.k.Delete(ctx, forged))
		admin.deleteClaim("admin-ip")
	})
}

// lbServiceWith is a LoadBalancer Service in ns with labels, naming claim.
func lbServiceWith(ns, name string, labels map[string]string, claim string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels,
			Annotations: map[string]string{iadv1alpha1.ServiceClaimAnnotation: claim}},
		Spec: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			AllocateLoadBalancerNodePorts: ptr.To(false),
			Selector:                      map[string]string{"app": name},
			Ports:                         []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
}
