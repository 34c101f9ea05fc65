//go:build integration

package ipaddress

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
	"github.com/cozystack/metallb-iad/internal/stale"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// testFinalizer keeps a deleted IPAddress around after the driver's
// teardown, so the test can look at what the teardown left.
const testFinalizer = "example.com/inspect-teardown"

// startClaimAndCore runs, until the test ends, the claim controller (as its
// own ServiceAccount, with the same placeholder namespace as the controller
// under test) and the reference core, so claims are stamped, provisioned,
// bound and reclaimed as in a real cluster.
func startClaimAndCore(t *testing.T) {
	t.Helper()
	suite.StartController(t, claim.Controller)
	suite.StartCore(t)
}

// classWithPolicy creates the MetalLB pool iad-<name> (manual only) and an
// IPAddressClass of this driver with the reclaim policy.
func classWithPolicy(t *testing.T, name string, policy iadv1alpha1.ReclaimPolicy, ranges ...string) {
	t.Helper()
	suite.Create(t, fixture.Pool(name, ranges...), cluster.Class(name, policy, ""))
}

// newClaim creates an IPv4 claim as a tenant: no provisioner stamp, the
// core resolves the class and stamps it.
func newClaim(t *testing.T, ns, name, class string) *iadv1alpha1.IPAddressClaim {
	t.Helper()
	cl := &iadv1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       iadv1alpha1.IPAddressClaimSpec{ClassName: class, Family: iadv1alpha1.FamilyIPv4},
	}
	require.NoError(t, adm.Create(context.Background(), cl))
	return cl
}

// requireBound waits until the claim is Bound to exactly one address, that
// address is Bound with a claimRef carrying the claim's uid, and returns
// the address.
func requireBound(t *testing.T, cl *iadv1alpha1.IPAddressClaim) *iadv1alpha1.IPAddress {
	t.Helper()
	var a *iadv1alpha1.IPAddress
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		cur := &iadv1alpha1.IPAddressClaim{}
		require.NoError(ct, adm.Get(context.Background(), client.ObjectKeyFromObject(cl), cur))
		require.Equal(ct, iadv1alpha1.ClaimBound, cur.Status.Phase)
		require.Len(ct, cur.Status.Addresses, 1)
		a = suite.GetAddress(ct, cur.Status.Addresses[0].Name)
		require.Equal(ct, iadv1alpha1.AddressBound, a.Status.Phase)
		require.Equal(ct, &iadv1alpha1.ClaimReference{Namespace: cl.Namespace, Name: cl.Name, UID: string(cl.UID)}, a.Spec.ClaimRef)
		require.Equal(ct, a.Spec.Address, cur.Status.Addresses[0].Address)
	}, fixture.MetalLBTimeout, fixture.Tick, "claim %s/%s is Bound", cl.Namespace, cl.Name)
	return a
}

// requireClaimGone deletes a claim and waits until the core let it go.
func requireClaimGone(t *testing.T, cl *iadv1alpha1.IPAddressClaim) {
	t.Helper()
	require.NoError(t, adm.Delete(context.Background(), cl))
	suite.WaitGone(t, fixture.Timeout, cl)
}

// placeholdersOfClass lists, from the API server, the placeholder Services
// drawing from a class's pool.
func placeholdersOfClass(t require.TestingT, class string) []corev1.Service {
	var list corev1.ServiceList
	require.NoError(t, adm.List(context.Background(), &list, client.InNamespace(testPlaceholderNamespace)))
	var out []corev1.Service
	for _, s := range list.Items {
		if s.Annotations[marks.KeyClass] == class {
			out = append(out, s)
		}
	}
	return out
}

// pinnedByHand is a plain LoadBalancer Service someone pinned by hand to ip
// in the class pool, as MetalLB's documentation shows.
func pinnedByHand(ns, name, class, ip string) *corev1.Service {
	return fixture.LoadBalancer(ns, name, map[string]string{
		marks.KeyPin:  ip,
		marks.KeyPool: names.PoolName(class),
	})
}

// TestRetainReleasedThenRecycled follows an address of a Retain class
// through its whole life with the claim controller and the core: a claim
// binds and holds it; deleting the claim leaves it Released and still held
// (a Service pinned to the IP by hand does not get it); an administrator
// clears its claimRef and it is Available, still held; a new claim of the
// class is bound to it by the core: the same object, the same IP.
func TestRetainReleasedThenRecycled(t *testing.T) {
	ctx := context.Background()
	startClaimAndCore(t)
	classWithPolicy(t, "retain", iadv1alpha1.ReclaimRetain, "192.0.2.112/29")
	suite.Namespace(t, "tenant-r")

	first := newClaim(t, "tenant-r", "first", "retain")
	a := requireBound(t, first)
	ip := a.Spec.Address
	assert.Equal(t, iadv1alpha1.ReclaimRetain, a.Spec.ReclaimPolicy)
	assert.Contains(t, a.Finalizers, marks.Finalizer)
	assert.Contains(t, a.Finalizers, iadv1alpha1.AddressProtectionFinalizer)
	hold := requireHeldBy(t, a.Name, ip)
	assert.Equal(t, placeholder.AllocationName(first.UID, string(iadv1alpha1.FamilyIPv4)), hold.Name,
		"the allocation placeholder, handed over, is the hold")

	// The claim goes: the address is Released, keeps its claimRef, and the
	// same placeholder keeps holding the same IP.
	requireClaimGone(t, first)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got := suite.GetAddress(ct, a.Name)
		assert.Equal(ct, iadv1alpha1.AddressReleased, got.Status.Phase)
		assert.Equal(ct, &iadv1alpha1.ClaimReference{Namespace: "tenant-r", Name: "first", UID: string(first.UID)}, got.Spec.ClaimRef)
	}, fixture.Timeout, fixture.Tick, "the address is Released")
	assert.Equal(t, a.UID, suite.GetAddress(t, a.Name).UID, "the same IPAddress")
	assert.Equal(t, hold.UID, requireHeldBy(t, a.Name, ip).UID, "the same placeholder holds")

	// MetalLB still has the IP in its books: a Service pinned to it by
	// hand is refused, naming the placeholder that has it.
	squatter := pinnedByHand("tenant-r", "squatter", "retain", ip)
	require.NoError(t, adm.Create(ctx, squatter))
	t.Cleanup(func() { _ = adm.Delete(context.Background(), squatter) })
	assert.Contains(t, suite.WaitEvent(t, fixture.About{Namespace: "tenant-r", Name: "squatter"}, stale.AllocationFailed).Message,
		"address also in use by "+testPlaceholderNamespace+"/"+hold.Name)
	got := &corev1.Service{}
	require.NoError(t, adm.Get(ctx, client.ObjectKeyFromObject(squatter), got))
	assert.Empty(t, got.Status.LoadBalancer.Ingress)

	// An administrator recycles it by clearing claimRef: Available, held.
	cur := suite.GetAddress(t, a.Name)
	orig := cur.DeepCopy()
	cur.Spec.ClaimRef = nil
	require.NoError(t, adm.Patch(ctx, cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got := suite.GetAddress(ct, a.Name)
		assert.Equal(ct, iadv1alpha1.AddressAvailable, got.Status.Phase)
		assert.Nil(ct, got.Spec.ClaimRef)
	}, fixture.Timeout, fixture.Tick, "the address is Available")
	assert.Equal(t, hold.UID, requireHeldBy(t, a.Name, ip).UID, "the same placeholder holds")

	// A new claim of the class: the core binds the Available address.
	second := newClaim(t, "tenant-r", "second", "retain")
	b := requireBound(t, second)
	assert.Equal(t, a.Name, b.Name)
	assert.Equal(t, a.UID, b.UID, "the same IPAddress, recycled")
	assert.Equal(t, ip, b.Spec.Address)
	assert.Equal(t, hold.UID, requireHeldBy(t, a.Name, ip).UID, "the same placeholder holds")
	assert.Len(t, suite.AddressesOfClass(t, "retain"), 1, "no second address was recorded")
	// Any allocation placeholder the claim controller started for the new
	// claim before the core bound it is dropped.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		phs := placeholdersOfClass(ct, "retain")
		require.Len(ct, phs, 1)
		assert.Equal(ct, hold.UID, phs[0].UID)
	}, fixture.Timeout, fixture.Tick, "only the hold remains in the pool")

	require.NoError(t, adm.Get(ctx, client.ObjectKeyFromObject(squatter), got))
	assert.Empty(t, got.Status.LoadBalancer.Ingress, "the hand-pinned Service never got the address")
}

// TestDeleteReclaimFreesIP: deleting the claim of a Delete class deletes its
// IPAddress; the driver's finalizer deletes the placeholder before the
// object goes, which frees the IP in MetalLB: a Service pinned to it by
// hand gets it.
func TestDeleteReclaimFreesIP(t *testing.T) {
	ctx := context.Background()
	startClaimAndCore(t)
	classWithPolicy(t, "delete", iadv1alpha1.ReclaimDelete, "192.0.2.128/29")
	suite.Namespace(t, "tenant-x")

	cl := newClaim(t, "tenant-x", "doomed", "delete")
	a := requireBound(t, cl)
	ip := a.Spec.Address
	assert.Equal(t, iadv1alpha1.ReclaimDelete, a.Spec.ReclaimPolicy)
	hold := requireHeldBy(t, a.Name, ip)

	// A finalizer of the test's own keeps the object visible after the
	// driver's teardown.
	cur := suite.GetAddress(t, a.Name)
	orig := cur.DeepCopy()
	controllerutil.AddFinalizer(cur, testFinalizer)
	require.NoError(t, adm.Patch(ctx, cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))

	requireClaimGone(t, cl)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got := suite.GetAddress(ct, a.Name)
		require.NotNil(ct, got.DeletionTimestamp, "the core deleted the address")
		assert.Equal(ct, []string{testFinalizer}, got.Finalizers, "the driver's and the core's finalizers are released")
		assert.Empty(ct, suite.PlaceholdersOf(ct, a.Name))
	}, fixture.Timeout, fixture.Tick, "the driver's teardown ran")
	err := adm.Get(ctx, client.ObjectKeyFromObject(hold), &corev1.Service{})
	assert.True(t, apierrors.IsNotFound(err), "the placeholder is deleted, got %v", err)

	// MetalLB has the IP free again: a Service pinned to it by hand gets it.
	taker := pinnedByHand("tenant-x", "taker", "delete", ip)
	require.NoError(t, adm.Create(ctx, taker))
	t.Cleanup(func() { _ = adm.Delete(context.Background(), taker) })
	suite.WaitIngress(t, taker, ip)

	// The object goes once the last finalizer does, and nothing records the
	// IP again.
	cur = suite.GetAddress(t, a.Name)
	orig = cur.DeepCopy()
	controllerutil.RemoveFinalizer(cur, testFinalizer)
	require.NoError(t, adm.Patch(ctx, cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
	suite.WaitGone(t, fixture.Timeout, cur)
	assert.Empty(t, suite.AddressesOfClass(t, "delete"))
	assert.Empty(t, placeholdersOfClass(t, "delete"))
	suite.WaitIngress(t, taker, ip)
}
