//go:build integration

package service

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// TestImportExistingServices runs the import end to end, with the reference
// core, the claim and IPAddress controllers and the real MetalLB
// controller. Before the class exists, MetalLB assigns addresses from a
// plain pool to plain Services: one auto-assigned, one pinned by hand, and
// the skip cases. Then the class (adoptExisting) and its pool appear (MetalLB
// refuses the overlapping pool and keeps its configuration), the Services
// are imported with their addresses unchanged and never unheld, the plain
// pool goes (MetalLB now serves the addresses from the class's pool), and
// the imported addresses survive their Services' deletion, Bound and held,
// to come back to new Services attached to the generated claims.
func TestImportExistingServices(t *testing.T) {
	ctx := context.Background()
	startDriver(t)
	const ns, offNS = "adopt", "adopt-off"
	const gold, off = "adopt-gold", "adopt-off"

	legacy := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: "legacy"},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.64/27", "2001:db8:77::/124"}},
	}
	require.NoError(t, c.Client.Create(ctx, legacy))

	// Plain Services, as MetalLB users have them today.
	pinned := lb(ns, "pinned", "")
	pinned.Annotations[marks.KeyPin] = "192.0.2.70"
	suite.Create(t, pinned)
	shareA, shareB := sharedLB(ns, "share-a", ""), sharedLB(ns, "share-b", "")
	shareB.Spec.Ports[0].Port, shareB.Spec.Ports[0].TargetPort = 443, intstr.FromInt32(8443)
	for _, s := range []*corev1.Service{shareA, shareB} {
		s.Annotations[marks.KeyPin] = "192.0.2.75"
		s.Annotations[marks.KeySharing] = "team-key"
		suite.Create(t, s)
	}
	offSvc := lb(offNS, "plain", "")
	offSvc.Annotations[marks.KeyPin] = "192.0.2.85"
	suite.Create(t, offSvc)
	suite.Create(t, sharedLB(ns, "auto", ""))
	suite.Create(t, sharedLB(ns, "taken", ""))
	suite.Create(t, lb(ns, "mixed", "", corev1.IPv4Protocol, corev1.IPv6Protocol))

	held := map[string]string{}
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		for _, n := range []string{"pinned", "share-a", "share-b", "auto", "taken"} {
			require.Len(t, fixture.Ingress(suite.GetService(t, ns, n)), 1, n)
		}
		require.Len(t, fixture.Ingress(suite.GetService(t, ns, "mixed")), 2)
		require.Len(t, fixture.Ingress(suite.GetService(t, offNS, "plain")), 1)
	}, fixture.MetalLBTimeout, fixture.Tick, "MetalLB assigned every plain Service its addresses")
	autoIP := fixture.Ingress(suite.GetService(t, ns, "auto"))[0]
	require.NotEqual(t, "192.0.2.70", autoIP)
	held[autoIP], held["192.0.2.70"] = "ip-"+dashed(autoIP), "ip-192-0-2-70"

	// A tenant's claim already has the name the import would generate for "taken".
	taken := suite.GetService(t, ns, "taken")
	takenClaim := createClaim(t, ns, names.ImportedClaimName(taken.Name, taken.UID), "no-such-class", iadv1alpha1.FamilyIPv4)

	before := map[string]float64{}
	for _, r := range []string{importImported, importSkipped} {
		before[r] = testutil.ToFloat64(importsTotal.WithLabelValues(gold, r))
	}
	w := watchHeld(t, held, client.ObjectKey{Namespace: ns, Name: "auto"}, client.ObjectKey{Namespace: ns, Name: "pinned"})

	// The classes, and their pools as the class controller renders them.
	suite.Create(t, cluster.Class(gold, iadv1alpha1.ReclaimRetain, `{"addresses": ["192.0.2.64/28"], "adoptExisting": true}`))
	suite.Create(t, cluster.Class(off, iadv1alpha1.ReclaimRetain, `{"addresses": ["192.0.2.80/28"]}`))
	goldPool := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: names.PoolName(gold)},
		Spec: metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.64/28"}, AutoAssign: ptr.To(false),
			AllocateTo: &metallbv1beta1.ServiceAllocation{ServiceSelectors: []metav1.LabelSelector{marks.GrantSelector(gold)}}},
	}
	require.NoError(t, c.Client.Create(ctx, goldPool))

	autoClaim := names.ImportedClaimName("auto", suite.GetService(t, ns, "auto").UID)
	pinnedClaim := names.ImportedClaimName("pinned", suite.GetService(t, ns, "pinned").UID)
	assertImported(t, ns, "auto", autoClaim, autoIP, iadv1alpha1.ReclaimRetain)
	assertImported(t, ns, "pinned", pinnedClaim, "192.0.2.70", iadv1alpha1.ReclaimRetain)

	auto := suite.GetService(t, ns, "auto")
	assert.Equal(t, autoIP, auto.Annotations[marks.KeyPin], "the driver pinned the auto-assigned Service to its address")
	assert.Equal(t, autoClaim, auto.Annotations[marks.KeyPinnedBy])
	assert.NotContains(t, auto.Annotations, marks.KeyOwnerPin)
	p := suite.GetService(t, ns, "pinned")
	assert.Equal(t, "192.0.2.70", p.Annotations[marks.KeyPin], "the owner's pin stays")
	assert.Equal(t, "192.0.2.70", p.Annotations[marks.KeyOwnerPin], "recorded as the owner's")
	assert.NotContains(t, p.Annotations, marks.KeyPinnedBy, "the driver does not claim authorship of the owner's pin")

	// Every skip case says why, naming both sides.
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", ns, "share-a", corev1.EventTypeWarning, ReasonImportSkippedSharedIP, "192.0.2.75", "Service "+ns+"/share-b")
		assertEvent(t, "Service", ns, "share-b", corev1.EventTypeWarning, ReasonImportSkippedSharedIP, "192.0.2.75", "Service "+ns+"/share-a")
		assertEvent(t, "Service", ns, "mixed", corev1.EventTypeWarning, ReasonImportSkippedPartlyInRange, "IPAddressClass "+gold, "2001:db8:77::")
		assertEvent(t, "Service", ns, "taken", corev1.EventTypeWarning, ReasonImportSkippedClaimNameTaken, ns+"/"+takenClaim.Name)
		assertEvent(t, "IPAddressClaim", ns, takenClaim.Name, corev1.EventTypeWarning, ReasonImportSkippedClaimNameTaken, "Service "+ns+"/taken")
		assert.Equal(t, before[importImported]+2, testutil.ToFloat64(importsTotal.WithLabelValues(gold, importImported)))
		assert.Equal(t, before[importSkipped]+4, testutil.ToFloat64(importsTotal.WithLabelValues(gold, importSkipped)))
	}, fixture.Timeout, fixture.Tick)
	for _, n := range []string{"share-a", "share-b", "mixed", "taken"} {
		s := suite.GetService(t, ns, n)
		assert.NotContains(t, s.Annotations, iadv1alpha1.ServiceClaimAnnotation, n)
		assert.NotContains(t, s.Annotations, marks.KeyImportedInto, n)
	}
	got := &iadv1alpha1.IPAddressClaim{}
	require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(takenClaim), got))
	assert.Empty(t, got.Labels[marks.LabelImported], "the tenant's claim is left alone")
	for _, n := range []string{"share-a", "mixed", "taken"} {
		for _, ip := range fixture.Ingress(suite.GetService(t, ns, n)) {
			err := c.Client.Get(ctx, client.ObjectKey{Name: "ip-" + dashed(ip)}, &iadv1alpha1.IPAddress{})
			assert.True(t, apierrors.IsNotFound(err), "no IPAddress for %s of skipped Service %s: %v", ip, n, err)
		}
	}

	// The class without the parameter imports nothing.
	assert.Never(t, func() bool {
		var claims iadv1alpha1.IPAddressClaimList
		err := c.Client.List(ctx, &claims, client.InNamespace(offNS))
		a := &iadv1alpha1.IPAddress{}
		return err != nil || len(claims.Items) > 0 || !apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKey{Name: "ip-192-0-2-85"}, a))
	}, 2*time.Second, fixture.Tick, "nothing imported for a class without adoptExisting")
	assert.Empty(t, suite.GetService(t, offNS, "plain").Annotations[iadv1alpha1.ServiceClaimAnnotation])

	// Hand the addresses from the plain pool to the class's pool: the skip
	// cases go first (their addresses are not the driver's), then the plain
	// pool. MetalLB keeps every assignment that the class's pool covers.
	for _, key := range []client.ObjectKey{{Namespace: ns, Name: "share-a"}, {Namespace: ns, Name: "share-b"},
		{Namespace: ns, Name: "mixed"}, {Namespace: ns, Name: "taken"}, {Namespace: offNS, Name: "plain"}} {
		require.NoError(t, c.Client.Delete(ctx, suite.GetService(t, key.Namespace, key.Name)))
	}
	require.NoError(t, c.Client.Delete(ctx, legacy))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		for _, n := range []string{"auto", "pinned"} {
			s := suite.GetService(t, ns, n)
			assert.Equal(t, names.PoolName(gold), s.Annotations["metallb.io/ip-allocated-from-pool"], n)
		}
	}, fixture.MetalLBTimeout, fixture.Tick, "MetalLB serves the imported addresses from the class's pool")
	assert.Equal(t, []string{autoIP}, fixture.Ingress(suite.GetService(t, ns, "auto")), "IP unchanged")
	assert.Equal(t, []string{"192.0.2.70"}, fixture.Ingress(suite.GetService(t, ns, "pinned")), "IP unchanged")
	w.AssertNeverUnheld(t, 0)

	// Deleting the Services leaves the addresses Bound and held.
	for _, n := range []string{"auto", "pinned"} {
		require.NoError(t, c.Client.Delete(ctx, suite.GetService(t, ns, n)))
	}
	for ip, addr := range held {
		assertHeld(t, addr, ip)
		assert.Equal(t, iadv1alpha1.AddressBound, suite.GetAddress(t, addr).Status.Phase)
	}

	// New Services attached to the generated claims get the same addresses.
	suite.Create(t, sharedLB(ns, "auto-again", autoClaim))
	assertAssociated(t, ns, "auto-again", autoClaim, autoIP, suite.GetAddress(t, held[autoIP]))
	suite.Create(t, lb(ns, "pinned-again", pinnedClaim))
	assertAssociated(t, ns, "pinned-again", pinnedClaim, "192.0.2.70", suite.GetAddress(t, "ip-192-0-2-70"))
}

// assertImported waits until the Service's address is imported: the
// generated claim Bound to exactly it, labelled, with Events; the IPAddress
// pre-bound (source fromClass, the class's reclaim policy), Bound and
// attached to the Service; the Service annotated with the claim; and
// MetalLB still giving the Service the same address.
func assertImported(t *testing.T, ns, svcName, claimName, ip string, reclaim iadv1alpha1.ReclaimPolicy) {
	t.Helper()
	addr := "ip-" + dashed(ip)
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		cl := &iadv1alpha1.IPAddressClaim{}
		require.NoError(t, c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: claimName}, cl))
		assert.Equal(t, "true", cl.Labels[marks.LabelImported])
		assert.Equal(t, addr, cl.Spec.AddressName)
		assert.Equal(t, iadv1alpha1.ClaimBound, cl.Status.Phase)
		assert.Equal(t, []iadv1alpha1.ClaimedAddress{{Name: addr, Address: ip}}, cl.Status.Addresses)
		a := suite.GetAddress(t, addr)
		assert.Equal(t, "true", a.Labels[marks.LabelImported])
		assert.Equal(t, reclaim, a.Spec.ReclaimPolicy)
		assert.NotNil(t, a.Spec.Source.FromClass)
		if assert.NotNil(t, a.Spec.ClaimRef) {
			assert.Equal(t, iadv1alpha1.ClaimReference{Namespace: ns, Name: claimName, UID: string(cl.UID)}, *a.Spec.ClaimRef)
		}
		assert.Equal(t, iadv1alpha1.AddressBound, a.Status.Phase)
		assert.Equal(t, &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: ns, Name: svcName}, a.Status.AssociatedTo)
		s := suite.GetService(t, ns, svcName)
		// The Service holds the address throughout; once the driver has
		// written its sharing key on a Service that can share, a hold
		// placeholder is created beside it (a shared attachment), which
		// MetalLB serves once it serves the class's pool (not while the
		// pool the address came from still overlaps it).
		if _, shared := s.Annotations[marks.KeySharedBy]; shared {
			assert.LessOrEqual(t, len(suite.PlaceholdersOf(t, addr)), 1, "at most the hold beside the Service in a shared attachment")
		} else {
			assert.Empty(t, suite.PlaceholdersOf(t, addr), "no placeholder: the Service holds the address")
		}
		assert.Equal(t, claimName, s.Annotations[iadv1alpha1.ServiceClaimAnnotation])
		assert.Equal(t, claimName, s.Annotations[marks.KeyImportedInto])
		assert.Equal(t, []string{ip}, fixture.Ingress(s))
		assert.True(t, marks.Of(s).Granted(a.Spec.ClassName), "granted the class pool")
		assertEvent(t, "Service", ns, svcName, corev1.EventTypeNormal, ReasonImported, ip, ns+"/"+claimName)
		assertEvent(t, "IPAddressClaim", ns, claimName, corev1.EventTypeNormal, ReasonImported, ip, "Service "+ns+"/"+svcName)
		assertEvent(t, "IPAddress", "", addr, corev1.EventTypeNormal, ReasonImported, "Service "+ns+"/"+svcName)
	}, fixture.MetalLBTimeout, fixture.Tick, "%s/%s imported", ns, svcName)
}

// dashed is an IPv4 address with dashes for dots.
func dashed(ip string) string {
	out := []byte(ip)
	for i, b := range out {
		if b == '.' {
			out[i] = '-'
		}
	}
	return string(out)
}

// TestImportServiceNamingItsPool imports a Service that names the plain pool
// MetalLB gave it its address from (metallb.io/address-pool), then retires
// that pool, as the README's next step says: the driver took the pool
// request over in the same write as its pin, so MetalLB keeps the address
// on the Service once the class's pool serves it. A Service attached to a
// claim while naming another pool is pinned the same way.
func TestImportServiceNamingItsPool(t *testing.T) {
	ctx := context.Background()
	startDriver(t)
	const ns, gold = "adopt-named", "adopt-named"

	legacy := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: "legacy-named"},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.32/28"}, AutoAssign: ptr.To(false)},
	}
	require.NoError(t, c.Client.Create(ctx, legacy))
	old := lb(ns, "old", "")
	old.Annotations[marks.KeyPool] = legacy.Name
	suite.Create(t, old)
	ip := suite.WaitAssigned(t, old) // from the pool it names

	suite.Create(t, cluster.Class(gold, iadv1alpha1.ReclaimRetain, `{"addresses": ["192.0.2.32/28"], "adoptExisting": true}`))
	require.NoError(t, c.Client.Create(ctx, &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: names.PoolName(gold)},
		Spec: metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.32/28"}, AutoAssign: ptr.To(false),
			AllocateTo: &metallbv1beta1.ServiceAllocation{ServiceSelectors: []metav1.LabelSelector{marks.GrantSelector(gold)}}},
	}))
	claim := names.ImportedClaimName("old", suite.GetService(t, ns, "old").UID)
	assertImported(t, ns, "old", claim, ip, iadv1alpha1.ReclaimRetain)
	s := suite.GetService(t, ns, "old")
	assert.NotContains(t, s.Annotations, marks.KeyPool, "the pool request went with the pin")
	assert.Equal(t, legacy.Name, s.Annotations[marks.KeyOwnerPool], "and is recorded")
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", ns, "old", corev1.EventTypeNormal, ReasonPoolRequestTakenOver, "metallb.io/address-pool: "+legacy.Name)
	}, fixture.Timeout, fixture.Tick)

	require.NoError(t, c.Client.Delete(ctx, legacy))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		s := suite.GetService(t, ns, "old")
		assert.Equal(t, names.PoolName(gold), s.Annotations["metallb.io/ip-allocated-from-pool"])
		assert.Equal(t, []string{ip}, fixture.Ingress(s))
	}, fixture.MetalLBTimeout, fixture.Tick, "the imported Service keeps its address once its old pool is gone")
	assert.Never(t, func() bool {
		s := &corev1.Service{}
		return c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "old"}, s) != nil || len(fixture.Ingress(s)) != 1 || fixture.Ingress(s)[0] != ip
	}, 3*time.Second, fixture.Tick, "and keeps it")

	// An attach of a Service that names another pool.
	other := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: "other-named"},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"198.51.100.208/30"}, AutoAssign: ptr.To(false)},
	}
	require.NoError(t, c.Client.Create(ctx, other))
	t.Cleanup(func() { _ = c.Client.Delete(ctx, other) })
	addrs := provisioned(t, ns, "web-ip", gold, iadv1alpha1.FamilyIPv4)
	web := sharedLB(ns, "web", "web-ip")
	web.Annotations[marks.KeyLegacyPool] = other.Name
	suite.Create(t, web)
	assertAssociated(t, ns, "web", "web-ip", addrs[0].Spec.Address, addrs...)
	got := suite.GetService(t, ns, "web")
	assert.NotContains(t, got.Annotations, marks.KeyLegacyPool)
	assert.Equal(t, other.Name, got.Annotations[marks.KeyOwnerPool])
}
