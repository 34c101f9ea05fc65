//go:build integration

package claim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/stale"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// TestStaleAllocationOfATenantServiceCleared: a tenant's Service that held
// the only address of a class is deleted while MetalLB is starting, so
// MetalLB keeps booking the address for it while no IPAddress records it.
// A claim of the class is then refused by MetalLB for lack of room; the
// claim controller, with the rights it has on Services outside the
// placeholder namespace, clears the stale allocation (a headless Service of
// the deleted Service's name, created and deleted) and says so on the
// class, and the claim gets the address.
func TestStaleAllocationOfATenantServiceCleared(t *testing.T) {
	ns := namespace(t)
	cl := rangedClass(t, "10.10.38.0/32")
	former := staleTenantAllocation(t, ns, "10.10.38.0", "10.10.39.0")

	c := claim(t, ns, cl.Name, iadv1alpha1.FamilyIPv4, names.Provisioner)
	_, a := recorded(t, c, iadv1alpha1.FamilyIPv4)
	assert.Equal(t, "10.10.38.0", a.Spec.Address)
	requireStaleCleared(t, cl, former, "10.10.38.0")
}

// TestStaleAllocationBlockingAWarmReservationCleared: the same stale
// allocation keeps a class from its warm reservation. MetalLB's refusal
// changes nothing on the warm placeholder, only an Event: the warm
// controller hears of it from the Event, clears the allocation, and the
// class gets its warm address.
func TestStaleAllocationBlockingAWarmReservationCleared(t *testing.T) {
	ns := namespace(t)
	cl := rangedClass(t, "10.10.40.0/32")
	t.Cleanup(func() { cleanupClass(cl.Name) })
	former := staleTenantAllocation(t, ns, "10.10.40.0", "10.10.41.0")

	orig := cl.DeepCopy()
	cl.Spec.Parameters.Raw = []byte(`{"addresses":["10.10.40.0/32"],"warmAddresses":1}`)
	require.NoError(t, k.Patch(ctx, cl, client.MergeFrom(orig)))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		addrs := suite.AddressesOfClass(ct, cl.Name)
		require.Len(ct, addrs, 1)
		assert.Equal(ct, "10.10.40.0", addrs[0].Spec.Address)
		assert.Nil(ct, addrs[0].Spec.ClaimRef, "a warm address")
	}, fixture.MetalLBTimeout, fixture.Tick, "the class gets its warm address")
	requireStaleCleared(t, cl, former, "10.10.40.0")
}

// staleTenantAllocation makes MetalLB book ip, an address of a class's
// pool, for a tenant's Service of namespace ns that no longer exists: the
// Service, pinned to ip, is deleted while MetalLB is starting
// (cluster.StartingWindow, with a blocker pinned to blockerIP, the only
// address of another class made here). It returns the deleted Service.
func staleTenantAllocation(t *testing.T, ns, ip, blockerIP string) *corev1.Service {
	t.Helper()
	blockers := rangedClass(t, blockerIP+"/32")
	former := fixture.LoadBalancer(ns, "former", map[string]string{marks.KeyPin: ip})
	suite.Create(t, former)
	suite.WaitIngress(t, former, ip)

	// The blocker's pool counts it only once the restarted MetalLB's first
	// pass has run, which books former first (it holds an address).
	blocker := fixture.LoadBalancer(ns, "blocker", map[string]string{marks.KeyPin: blockerIP})
	end := suite.StartingWindow(t, blocker, names.PoolName(blockers.Name), 1)
	require.NoError(t, k.Delete(ctx, former))
	suite.WaitGone(t, fixture.Timeout, former)
	end()
	// MetalLB leaves its start-up window at the pass that writes the
	// blocker's address; the deletion of former was dropped, and MetalLB
	// still books ip for it.
	suite.WaitIngress(t, blocker, blockerIP)
	return former
}

// requireStaleCleared checks that the class tells the stale allocation of
// ip for the deleted Service former was cleared, and that the Service made
// to clear it is gone.
func requireStaleCleared(t *testing.T, cl *iadv1alpha1.IPAddressClass, former *corev1.Service, ip string) {
	t.Helper()
	ev := suite.WaitEvent(t, fixture.Of(cl), stale.ReasonCleared)
	assert.Contains(t, ev.Message, former.Namespace+"/"+former.Name)
	assert.Contains(t, ev.Message, ip)
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		err := k.Get(ctx, client.ObjectKeyFromObject(former), &corev1.Service{})
		assert.True(ct, apierrors.IsNotFound(err), "the headless Service made to clear the allocation is gone: %v", err)
	}, fixture.Timeout, fixture.Tick)
}
