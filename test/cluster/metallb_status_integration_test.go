//go:build integration

package cluster_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/test/bench"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// statusPuts is how many PUT services/status requests the API server has
// answered. Only MetalLB writes the status of Services here.
func statusPuts(t *testing.T, cs kubernetes.Interface) float64 {
	t.Helper()
	m, err := bench.ScrapeAPIServer(context.Background(), cs)
	require.NoError(t, err)
	return bench.APIRequests(nil, m)["PUT services/status"]
}

// TestMetalLBRewritesStatusOnEveryEvent pins down a behaviour of the
// MetalLB controller on this API server that the driver's design counts on
// (docs/design.md §4, "What a full pass costs"): the API server fills in
// ingress[].ipMode (VIP) on every LoadBalancer Service, MetalLB v0.15.2
// computes the status without it, so each time MetalLB processes an
// allocated Service it writes the status again, an identical one. Any
// change to a Service therefore costs one status write of MetalLB's rate
// limited client, and a full pass costs one per allocated Service. Should
// a MetalLB upgrade stop this, this test fails, and the driver's pacing
// (and BENCHMARKS.md) should be looked at again.
func TestMetalLBRewritesStatusOnEveryEvent(t *testing.T) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(c.Config)
	require.NoError(t, err)
	require.NoError(t, c.EnsureNamespace(ctx, "harness-ipmode"))
	pool := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: "ipmode"},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.50/32"}, AutoAssign: ptr.To(false)},
	}
	require.NoError(t, c.Client.Create(ctx, pool))
	svc := loadBalancer("harness-ipmode", "lb", "ipmode", corev1.IPv4Protocol)
	require.NoError(t, c.Client.Create(ctx, svc))

	got := &corev1.Service{}
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(svc), got))
		require.Len(t, got.Status.LoadBalancer.Ingress, 1)
		assert.Equal(t, "192.0.2.50", got.Status.LoadBalancer.Ingress[0].IP)
	}, 2*time.Minute, 50*time.Millisecond)
	require.NotNil(t, got.Status.LoadBalancer.Ingress[0].IPMode, "the API server fills in ipMode")
	assert.Equal(t, corev1.LoadBalancerIPModeVIP, *got.Status.LoadBalancer.Ingress[0].IPMode)

	// quiet waits until MetalLB has written nothing for two seconds and
	// returns the count of status writes then.
	quiet := func() float64 {
		n, since := statusPuts(t, cs), time.Now()
		for time.Since(since) < 2*time.Second {
			time.Sleep(250 * time.Millisecond)
			if m := statusPuts(t, cs); m != n {
				n, since = m, time.Now()
			}
		}
		return n
	}
	for i := range 2 {
		before := quiet()
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(svc), got))
		rv := got.ResourceVersion
		got.Labels = map[string]string{"touched": strconv.Itoa(i)}
		require.NoError(t, c.Client.Update(ctx, got))
		labelled := got.ResourceVersion
		// MetalLB may take longer than the quiet window to get to the change.
		require.Eventually(t, func() bool {
			m, err := bench.ScrapeAPIServer(ctx, cs)
			return err == nil && bench.APIRequests(nil, m)["PUT services/status"] > before
		}, 2*time.Minute, 250*time.Millisecond, "MetalLB writes the status after the label change (change %d)", i)
		assert.Equal(t, before+1, quiet(), "a label change costs MetalLB one status write (change %d)", i)
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(svc), got))
		assert.Equal(t, labelled, got.ResourceVersion, "the status written is the one stored (change %d, before it %s)", i, rv)
	}
}
