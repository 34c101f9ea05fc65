//go:build integration

package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/test/cluster"
)

var c *cluster.Cluster

func TestMain(m *testing.M) {
	cluster.Main(m, func(m *testing.M) (int, error) {
		var err error
		if c, err = cluster.Start(context.Background(), cluster.Options{}); err != nil {
			return 0, err
		}
		defer c.Stop()
		return m.Run(), nil
	})
}

func loadBalancer(ns, name, pool string, family corev1.IPFamily) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{"metallb.io/address-pool": pool}},
		Spec: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			AllocateLoadBalancerNodePorts: ptr.To(false),
			IPFamilies:                    []corev1.IPFamily{family},
			IPFamilyPolicy:                ptr.To(corev1.IPFamilyPolicySingleStack),
			Ports:                         []corev1.ServicePort{{Name: "p", Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// TestMetalLBAssignsFromManualPool proves the harness runs the real MetalLB
// controller: a Service selecting an autoAssign=false pool gets an address
// from it, for IPv4 and IPv6.
func TestMetalLBAssignsFromManualPool(t *testing.T) {
	ctx := context.Background()
	require.NoError(t, c.EnsureNamespace(ctx, "harness"))
	pool := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: "manual"},
		Spec: metallbv1beta1.IPAddressPoolSpec{
			Addresses:  []string{"192.0.2.10/32", "2001:db8:1::10/128"},
			AutoAssign: ptr.To(false),
		},
	}
	require.NoError(t, c.Client.Create(ctx, pool))

	for family, want := range map[corev1.IPFamily]string{corev1.IPv4Protocol: "192.0.2.10", corev1.IPv6Protocol: "2001:db8:1::10"} {
		svc := loadBalancer("harness", "lb-"+map[corev1.IPFamily]string{corev1.IPv4Protocol: "v4", corev1.IPv6Protocol: "v6"}[family], "manual", family)
		require.NoError(t, c.Client.Create(ctx, svc))
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			got := &corev1.Service{}
			require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(svc), got))
			require.Len(t, got.Status.LoadBalancer.Ingress, 1)
			assert.Equal(t, want, got.Status.LoadBalancer.Ingress[0].IP)
		}, 2*time.Minute, 50*time.Millisecond, "MetalLB assigns %s", want)
	}

	// A Service that selects no pool gets nothing: the pool is manual-only.
	plain := loadBalancer("harness", "unpooled", "", corev1.IPv4Protocol)
	plain.Annotations = nil
	require.NoError(t, c.Client.Create(ctx, plain))
	time.Sleep(time.Second)
	got := &corev1.Service{}
	require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(plain), got))
	assert.Empty(t, got.Status.LoadBalancer.Ingress)
}

// TestGarbageCollection proves kube-controller-manager runs: an object
// owner-referenced to a deleted owner is removed.
func TestGarbageCollection(t *testing.T) {
	ctx := context.Background()
	require.NoError(t, c.EnsureNamespace(ctx, "harness-gc"))
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "harness-gc", Name: "owner"}}
	require.NoError(t, c.Client.Create(ctx, owner))
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "harness-gc", Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
	require.NoError(t, c.Client.Create(ctx, dep))
	require.NoError(t, c.Client.Delete(ctx, owner))
	assert.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKeyFromObject(dep), &corev1.ConfigMap{}))
	}, 60*time.Second, 100*time.Millisecond, "the garbage collector removes the dependent")
}

// TestTenantHasOnlyRBACRights proves the API server enforces RBAC for the
// users the harness hands out.
func TestTenantHasOnlyRBACRights(t *testing.T) {
	ctx := context.Background()
	cfg, err := c.AddUser("harness-tenant")
	require.NoError(t, err)
	tenant, err := client.New(cfg, client.Options{Scheme: c.Client.Scheme()})
	require.NoError(t, err)
	err = tenant.List(ctx, &corev1.ServiceList{}, client.InNamespace("default"))
	assert.True(t, apierrors.IsForbidden(err), "a tenant without a RoleBinding is forbidden, got %v", err)

	sa, err := client.New(c.ServiceAccountConfig("default", "nobody"), client.Options{Scheme: c.Client.Scheme()})
	require.NoError(t, err)
	err = sa.List(ctx, &corev1.ServiceList{}, client.InNamespace("default"))
	assert.True(t, apierrors.IsForbidden(err), "a ServiceAccount without a binding is forbidden, got %v", err)
}
