//go:build integration

package claim

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

const (
	// phNS is the placeholder namespace of the controller under test.
	phNS = cluster.DriverNamespace

	otherProvisioner = "other.example.org"
)

var (
	suite *fixture.Suite
	ctx   context.Context
	k     client.Client // the admin, acting as the tenant, the core or an operator
	// cached is the suite manager's client: its cache, the controller's view.
	cached client.Client
)

func TestMain(m *testing.M) {
	fixture.Main(m, fixture.Options{Controller: Controller}, func(s *fixture.Suite) {
		suite, ctx, k, cached = s, s.Context(), s.Client, s.Cached()
	})
}

// --- fixtures ---

// namespace creates a namespace for one test's claims.
func namespace(t *testing.T) string {
	t.Helper()
	n := suite.Namespace(t, "t-"+rand.String(6))
	t.Cleanup(func() { cleanupNamespace(n) })
	return n
}

// cleanupNamespace removes what a test left: its claims, the IPAddresses
// bound to them (stripping the driver's finalizer, as the IPAddress
// controller would after teardown) and their placeholders.
func cleanupNamespace(ns string) {
	var claims iadv1alpha1.IPAddressClaimList
	_ = k.List(ctx, &claims, client.InNamespace(ns))
	for i := range claims.Items {
		_ = k.Delete(ctx, &claims.Items[i])
	}
	var addrs iadv1alpha1.IPAddressList
	_ = k.List(ctx, &addrs)
	for i := range addrs.Items {
		a := &addrs.Items[i]
		if a.Spec.ClaimRef != nil && a.Spec.ClaimRef.Namespace == ns {
			deleteAddress(a)
		}
	}
	var phs corev1.ServiceList
	_ = k.List(ctx, &phs, client.InNamespace(phNS))
	for i := range phs.Items {
		if phs.Items[i].Annotations[marks.AnnotationClaimNamespace] == ns {
			_ = k.Delete(ctx, &phs.Items[i])
		}
	}
}

// deleteAddress deletes an IPAddress (that very object, not another of the
// same name) and releases the driver's finalizer.
func deleteAddress(a *iadv1alpha1.IPAddress) {
	_ = k.Delete(ctx, a, client.Preconditions{UID: &a.UID})
	cur := &iadv1alpha1.IPAddress{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(a), cur); err == nil && cur.UID == a.UID && len(cur.Finalizers) > 0 {
		orig := cur.DeepCopy()
		cur.Finalizers = nil
		_ = k.Patch(ctx, cur, client.MergeFrom(orig))
	}
}

// class creates an IPAddressClass of provisioner, without parameters, and,
// unless addresses is empty, the MetalLB pool the class controller would
// render; both go when the test ends.
func class(t *testing.T, provisioner string, policy iadv1alpha1.ReclaimPolicy, addresses ...string) string {
	t.Helper()
	cl := cluster.Class("c-"+rand.String(6), policy, "")
	cl.Spec.Provisioner = provisioner
	suite.CreateForTest(t, cl)
	if len(addresses) > 0 {
		suite.CreateForTest(t, fixture.Pool(cl.Name, addresses...))
	}
	return cl.Name
}

// claim creates a claim as the tenant, stamped with provisioner as the core
// would (no stamp when provisioner is empty).
func claim(t *testing.T, ns, class string, family iadv1alpha1.IPFamily, provisioner string) *iadv1alpha1.IPAddressClaim {
	t.Helper()
	c := &iadv1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claim-" + rand.String(5)},
		Spec:       iadv1alpha1.IPAddressClaimSpec{ClassName: class, Family: family},
	}
	if provisioner != "" {
		c.Annotations = map[string]string{iadv1alpha1.ProvisionerAnnotation: provisioner}
	}
	require.NoError(t, k.Create(ctx, c))
	return c
}

// stamp stamps a claim with this driver's provisioner, as the core does.
func stamp(t *testing.T, c *iadv1alpha1.IPAddressClaim) {
	t.Helper()
	orig := c.DeepCopy()
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[iadv1alpha1.ProvisionerAnnotation] = names.Provisioner
	require.NoError(t, k.Patch(ctx, c, client.MergeFrom(orig)))
}

func placeholderKey(c *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily) types.NamespacedName {
	return types.NamespacedName{Namespace: phNS, Name: placeholder.AllocationName(c.UID, string(f))}
}

// recorded waits until the claim's family is recorded: an IPAddress of
// the family bound to the claim (by uid), and the placeholder labelled with
// it as its hold, owner-referenced to it; it returns both. It waits on
// those outcomes, not on the allocation placeholder by name, which the
// code under test may delete and draw again (a give-back, a retarget) on
// a busy machine; and it allows for MetalLB in the backoff of a failed full
// pass (fixture.MetalLBTimeout).
func recorded(t *testing.T, c *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily) (*corev1.Service, *iadv1alpha1.IPAddress) {
	t.Helper()
	var ph *corev1.Service
	var a *iadv1alpha1.IPAddress
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ph, a = nil, nil
		for _, cand := range addressesOf(ct, c) {
			ip, err := names.ParseAddress(cand.Spec.Address)
			if err == nil && cand.Spec.ClaimRef.UID == string(c.UID) && (ip.Is4() == (f == iadv1alpha1.FamilyIPv4)) {
				a = &cand
			}
		}
		require.NotNil(ct, a, "an IPAddress of family %s bound to the claim", f)
		var list corev1.ServiceList
		require.NoError(ct, k.List(ctx, &list, client.InNamespace(phNS), client.MatchingLabels{marks.LabelAddress: a.Name}))
		require.Len(ct, list.Items, 1, "one placeholder labelled with %s", a.Name)
		ph = &list.Items[0]
		require.Equal(ct, names.PlaceholderHold, ph.Labels[marks.LabelPlaceholder])
		require.Len(ct, ph.OwnerReferences, 1)
		require.NotEmpty(ct, ph.Status.LoadBalancer.Ingress, "the hold holds the address")
	}, fixture.MetalLBTimeout, fixture.Tick, "the %s address of %s/%s is never recorded", f, c.Namespace, c.Name)
	return ph, a
}

// assertRecorded checks every field of a recorded address and its placeholder.
func assertRecorded(t *testing.T, c *iadv1alpha1.IPAddressClaim, class string, policy iadv1alpha1.ReclaimPolicy,
	f iadv1alpha1.IPFamily, ph *corev1.Service, a *iadv1alpha1.IPAddress) netip.Addr {
	t.Helper()
	require.Len(t, ph.Status.LoadBalancer.Ingress, 1)
	ip, err := names.ParseAddress(ph.Status.LoadBalancer.Ingress[0].IP)
	require.NoError(t, err)
	wantName, err := names.AddressName(ip)
	require.NoError(t, err)

	assert.Equal(t, wantName, a.Name)
	assert.Equal(t, ip.String(), a.Spec.Address, "canonical address")
	assert.Equal(t, class, a.Spec.ClassName)
	assert.Equal(t, policy, a.Spec.ReclaimPolicy)
	assert.Equal(t, &iadv1alpha1.ClaimReference{Namespace: c.Namespace, Name: c.Name, UID: string(c.UID)}, a.Spec.ClaimRef)
	assert.NotNil(t, a.Spec.Source.FromClass)
	assert.Nil(t, a.Spec.Source.ProviderRef)
	assert.Contains(t, a.Finalizers, marks.Finalizer)
	assert.NotContains(t, a.Finalizers, iadv1alpha1.AddressProtectionFinalizer, "the core's finalizer is not the driver's to write")
	assert.Empty(t, a.Status.Phase, "phases are not the driver's to write")

	assert.Equal(t, wantName, ph.Labels[marks.LabelAddress])
	assert.Equal(t, names.PlaceholderHold, ph.Labels[marks.LabelPlaceholder])
	assert.Equal(t, string(c.UID), ph.Labels[marks.LabelClaimUID])
	assert.Equal(t, ip.String(), ph.Annotations[marks.KeyPin], "pinned to its own address")
	assert.NotContains(t, ph.Annotations, marks.KeySharing,
		"no sharing key until a workload is about to share the address (each first key costs MetalLB a pass over every Service)")
	assert.Equal(t, names.PoolName(class), ph.Annotations[marks.KeyPool])
	assert.Equal(t, c.Namespace, ph.Annotations[marks.AnnotationClaimNamespace])
	assert.Equal(t, c.Name, ph.Annotations[marks.AnnotationClaimName])
	assert.Equal(t, string(f), ph.Annotations[marks.AnnotationFamily])
	assert.Equal(t, class, ph.Annotations[marks.KeyClass])
	require.Len(t, ph.OwnerReferences, 1)
	assert.Equal(t, metav1.OwnerReference{
		APIVersion: iadv1alpha1.GroupVersion.String(), Kind: "IPAddress", Name: a.Name, UID: a.UID,
		Controller: new(bool), BlockOwnerDeletion: new(bool),
	}, ph.OwnerReferences[0])

	assert.Equal(t, corev1.ServiceTypeLoadBalancer, ph.Spec.Type)
	assert.Nil(t, ph.Spec.Selector)
	require.NotNil(t, ph.Spec.AllocateLoadBalancerNodePorts)
	assert.False(t, *ph.Spec.AllocateLoadBalancerNodePorts)
	assert.Equal(t, []corev1.IPFamily{draw.ServiceFamily(f)}, ph.Spec.IPFamilies)
	return ip
}

// addressesOf lists the IPAddresses whose claimRef names the claim.
func addressesOf(t require.TestingT, c *iadv1alpha1.IPAddressClaim) []iadv1alpha1.IPAddress {
	var list iadv1alpha1.IPAddressList
	require.NoError(t, k.List(ctx, &list))
	var out []iadv1alpha1.IPAddress
	for _, a := range list.Items {
		if a.Spec.ClaimRef != nil && a.Spec.ClaimRef.Namespace == c.Namespace && a.Spec.ClaimRef.Name == c.Name {
			out = append(out, a)
		}
	}
	return out
}

// placeholdersOf lists the placeholders labelled with the claim's uid.
func placeholdersOf(t require.TestingT, c *iadv1alpha1.IPAddressClaim) []corev1.Service {
	var list corev1.ServiceList
	require.NoError(t, k.List(ctx, &list, client.InNamespace(phNS), client.MatchingLabels{marks.LabelClaimUID: string(c.UID)}))
	return list.Items
}

// exhausted creates a class of one address, a claim that takes it, and a
// second claim that waits on the exhausted pool; it returns the class and
// the waiting claim.
func exhausted(t *testing.T, ns, address string) (string, *iadv1alpha1.IPAddressClaim) {
	t.Helper()
	cl := class(t, names.Provisioner, "", address)
	first := claim(t, ns, cl, iadv1alpha1.FamilyIPv4, names.Provisioner)
	recorded(t, first, iadv1alpha1.FamilyIPv4)
	waiting := claim(t, ns, cl, iadv1alpha1.FamilyIPv4, names.Provisioner)
	suite.WaitEvent(t, fixture.Of(waiting), ReasonPoolExhausted)
	return cl, waiting
}

// --- tests ---

func TestIPv4ClaimIsRecorded(t *testing.T) {
	ns := namespace(t)
	cl := class(t, names.Provisioner, iadv1alpha1.ReclaimDelete, "10.10.1.0/29")
	c := claim(t, ns, cl, iadv1alpha1.FamilyIPv4, names.Provisioner)

	ph, a := recorded(t, c, iadv1alpha1.FamilyIPv4)
	ip := assertRecorded(t, c, cl, iadv1alpha1.ReclaimDelete, iadv1alpha1.FamilyIPv4, ph, a)
	assert.True(t, netip.MustParsePrefix("10.10.1.0/29").Contains(ip), "%s is from the class pool", ip)

	// A claim's way to Bound tells nothing when nothing holds it up: the
	// core lists the address in its status. Not even WaitingForMetalLB,
	// unless MetalLB, on a busy machine, took metallbQuiet to answer.
	told := func() bool {
		for _, e := range suite.Events(t, fixture.Of(c), "") {
			if e.Reason != ReasonWaitingForMetalLB || e.FirstTimestamp.Sub(c.CreationTimestamp.Time) < metallbQuiet-time.Second {
				return true
			}
		}
		return false
	}
	assert.Never(t, told, 2*time.Second, fixture.Tick, "an Event on a claim nothing held up")

	// One address, one placeholder: nothing allocated twice.
	assert.Len(t, addressesOf(t, c), 1)
	assert.Len(t, placeholdersOf(t, c), 1)
	// The driver never writes claim status or finalizers.
	cur := &iadv1alpha1.IPAddressClaim{}
	require.NoError(t, k.Get(ctx, client.ObjectKeyFromObject(c), cur))
	assert.Empty(t, cur.Status)
	assert.Empty(t, cur.Finalizers)

	// Counted right after the hand-over the wait saw.
	assert.Eventually(t, func() bool {
		return testutil.ToFloat64(draw.AllocationsTotal.WithLabelValues(cl, "IPv4", draw.ResultRecorded)) == 1
	},
		fixture.Timeout, fixture.Tick, "one recording counted")
	assert.Eventually(t, func() bool { return testutil.ToFloat64(claimsPending.WithLabelValues(cl)) == 0 }, fixture.Timeout, fixture.Tick)
}

func TestIPv6ClaimIsRecorded(t *testing.T) {
	ns := namespace(t)
	cl := class(t, names.Provisioner, "", "fd00:aa:1::/120")
	c := claim(t, ns, cl, iadv1alpha1.FamilyIPv6, names.Provisioner)

	ph, a := recorded(t, c, iadv1alpha1.FamilyIPv6)
	ip := assertRecorded(t, c, cl, iadv1alpha1.ReclaimRetain, iadv1alpha1.FamilyIPv6, ph, a)
	assert.True(t, ip.Is6())
	assert.True(t, netip.MustParsePrefix("fd00:aa:1::/120").Contains(ip), "%s is from the class pool", ip)
	assert.True(t, strings.HasPrefix(a.Name, "ip6-fd00-00aa-0001-0000-0000-0000-0000-00"), a.Name)
}

func TestDualClaimGetsTwoAddresses(t *testing.T) {
	ns := namespace(t)
	cl := class(t, names.Provisioner, "", "10.10.2.0/29", "fd00:aa:2::/124")
	c := claim(t, ns, cl, iadv1alpha1.FamilyDual, names.Provisioner)

	ph4, a4 := recorded(t, c, iadv1alpha1.FamilyIPv4)
	ph6, a6 := recorded(t, c, iadv1alpha1.FamilyIPv6)
	ip4 := assertRecorded(t, c, cl, iadv1alpha1.ReclaimRetain, iadv1alpha1.FamilyIPv4, ph4, a4)
	ip6 := assertRecorded(t, c, cl, iadv1alpha1.ReclaimRetain, iadv1alpha1.FamilyIPv6, ph6, a6)
	assert.True(t, ip4.Is4())
	assert.True(t, ip6.Is6())
	assert.NotEqual(t, ph4.Name, ph6.Name)
	assert.Len(t, addressesOf(t, c), 2)
	assert.Len(t, placeholdersOf(t, c), 2)
}

// TestCrashAfterPinning starts from the state a crash between steps (a) and
// (b) leaves: the placeholder labelled and pinned, no IPAddress.
func TestCrashAfterPinning(t *testing.T) {
	ns := namespace(t)
	cl := class(t, names.Provisioner, "", "10.10.3.0/29")
	c := claim(t, ns, cl, iadv1alpha1.FamilyIPv4, "") // not stamped yet: the controller leaves it alone

	ph := draw.RenderPlaceholder(phNS, c, cl, iadv1alpha1.FamilyIPv4)
	ph.Labels[marks.LabelAddress] = "ip-10-10-3-4"
	ph.Annotations[marks.KeyPin] = "10.10.3.4"
	require.NoError(t, k.Create(ctx, ph))
	require.Eventually(t, func() bool {
		return k.Get(ctx, client.ObjectKeyFromObject(ph), ph) == nil && draw.AssignedIP(ph, iadv1alpha1.FamilyIPv4) == "10.10.3.4"
	}, fixture.MetalLBTimeout, fixture.Tick, "MetalLB honours the pin")

	stamp(t, c)
	ph, a := recorded(t, c, iadv1alpha1.FamilyIPv4)
	ip := assertRecorded(t, c, cl, iadv1alpha1.ReclaimRetain, iadv1alpha1.FamilyIPv4, ph, a)
	assert.Equal(t, "10.10.3.4", ip.String())
	assert.Equal(t, "ip-10-10-3-4", a.Name)
	assert.Len(t, addressesOf(t, c), 1)
	assert.Empty(t, suite.Events(t, fixture.Of(c), ReasonWaitingForMetalLB), "the placeholder existed: nothing was created")
}

// TestCrashAfterAddress starts from the state a crash between steps (b) and
// (c) leaves: the IPAddress recorded, the placeholder not handed over.
func TestCrashAfterAddress(t *testing.T) {
	ns := namespace(t)
	cl := class(t, names.Provisioner, iadv1alpha1.ReclaimDelete, "10.10.4.0/29")
	c := claim(t, ns, cl, iadv1alpha1.FamilyIPv4, "")

	ph := draw.RenderPlaceholder(phNS, c, cl, iadv1alpha1.FamilyIPv4)
	ph.Labels[marks.LabelAddress] = "ip-10-10-4-2"
	ph.Annotations[marks.KeyPin] = "10.10.4.2"
	require.NoError(t, k.Create(ctx, ph))
	pre := draw.RenderAddress(c, &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: cl},
		Spec: iadv1alpha1.IPAddressClassSpec{ReclaimPolicy: iadv1alpha1.ReclaimDelete}}, "10.10.4.2", "ip-10-10-4-2")
	require.NoError(t, k.Create(ctx, pre))
	require.Eventually(t, func() bool {
		return k.Get(ctx, client.ObjectKeyFromObject(ph), ph) == nil && draw.AssignedIP(ph, iadv1alpha1.FamilyIPv4) == "10.10.4.2"
	}, fixture.MetalLBTimeout, fixture.Tick, "MetalLB honours the pin")

	stamp(t, c)
	ph, a := recorded(t, c, iadv1alpha1.FamilyIPv4)
	assertRecorded(t, c, cl, iadv1alpha1.ReclaimDelete, iadv1alpha1.FamilyIPv4, ph, a)
	assert.Equal(t, pre.UID, a.UID, "the existing IPAddress is adopted, not replaced")
	assert.Len(t, addressesOf(t, c), 1)
}

// TestLedgerAddressGivenBack: MetalLB assigns an address whose IPAddress is
// bound to another claim (nothing holds it in MetalLB: no IPAddress
// controller runs in this suite). The driver gives it back instead of
// writing on the placeholder or recording it, and does not draw again while
// that entry is unheld; once an administrator removes the stale entry, it
// records the address.
func TestLedgerAddressGivenBack(t *testing.T) {
	ns := namespace(t)
	cl := class(t, names.Provisioner, "", "10.10.5.9/32")
	stale := &iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-10-5-9"},
		Spec: iadv1alpha1.IPAddressSpec{
			Address: "10.10.5.9", ClassName: cl,
			ClaimRef: &iadv1alpha1.ClaimReference{Namespace: "team-b", Name: "db", UID: "0d4b0c7e-0000-4000-8000-000000000001"},
			Source:   iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}},
		},
	}
	require.NoError(t, k.Create(ctx, stale))
	t.Cleanup(func() { deleteAddress(stale) })

	// The claim's first placeholder is created before the entry is in the
	// claim controller's cache at the latest; either MetalLB hands it the
	// address and the driver gives it back, or the claim waits at once.
	c := claim(t, ns, cl, iadv1alpha1.FamilyIPv4, names.Provisioner)
	ev := suite.WaitEvent(t, fixture.Of(c), ReasonWaitingForLedger)
	assert.Equal(t, corev1.EventTypeNormal, ev.Type)
	assert.Equal(t, "IPAddress ip-10-10-5-9 (10.10.5.9) of class "+cl+" is in the ledger but not held in MetalLB right now "+
		"(a handoff is under way); the claim asks pool iad-"+cl+" for an IPv4 address once it is held again, so that "+
		"MetalLB cannot hand it that address", ev.Message)
	for _, r := range suite.Events(t, fixture.Of(c), ReasonLedgerAddressReturned) {
		assert.Equal(t, "MetalLB assigned IPv4 address 10.10.5.9 to this claim's placeholder, but IPAddress ip-10-10-5-9 records it and "+
			"is bound to claim team-b/db (uid 0d4b0c7e-0000-4000-8000-000000000001); the driver gave it back (deleted the placeholder) "+
			"instead of recording it, and draws again once every address of the ledger is held", r.Message)
	}

	// No fight, and no drawing the same address again: the entry is
	// untouched, no placeholder of the claim stays, nothing is recorded.
	assert.Never(t, func() bool { return len(placeholdersOf(t, c)) > 0 }, 2*time.Second, fixture.Tick, "no placeholder while the entry is unheld")
	cur := &iadv1alpha1.IPAddress{}
	require.NoError(t, k.Get(ctx, client.ObjectKeyFromObject(stale), cur))
	assert.Equal(t, stale.Spec, cur.Spec)
	assert.Empty(t, cur.Finalizers)
	assert.Empty(t, addressesOf(t, c))
	assert.LessOrEqual(t, len(suite.Events(t, fixture.Of(c), ReasonLedgerAddressReturned)), 1, "given back at most once")

	// The administrator deletes the stale entry: the claim proceeds.
	require.NoError(t, k.Delete(ctx, stale))
	ph, a := recorded(t, c, iadv1alpha1.FamilyIPv4)
	assertRecorded(t, c, cl, iadv1alpha1.ReclaimRetain, iadv1alpha1.FamilyIPv4, ph, a)
	assert.Equal(t, "ip-10-10-5-9", a.Name)
}

// TestPoolExhaustion: with a one-address pool the second claim waits with a
// PoolExhausted warning, and proceeds by itself once the address is freed.
func TestPoolExhaustion(t *testing.T) {
	ns := namespace(t)
	cl := class(t, names.Provisioner, "", "10.10.6.5/32")
	first := claim(t, ns, cl, iadv1alpha1.FamilyIPv4, names.Provisioner)
	_, firstAddr := recorded(t, first, iadv1alpha1.FamilyIPv4)
	assert.Equal(t, "10.10.6.5", firstAddr.Spec.Address)

	second := claim(t, ns, cl, iadv1alpha1.FamilyIPv4, names.Provisioner)
	ev := suite.WaitEvent(t, fixture.Of(second), ReasonPoolExhausted)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.True(t, strings.HasPrefix(ev.Message, "MetalLB has no free IPv4 address in pool iad-"+cl+" (class "+cl+"): "+
		"the pool is exhausted or has no IPv4 range. The claim stays Pending and proceeds as soon as an address is freed. "+
		"MetalLB said: Failed to allocate IP for \""+phNS+"/alloc-ipv4-"+string(second.UID)+"\""), ev.Message)
	assert.Empty(t, addressesOf(t, second))
	assert.Eventually(t, func() bool { return testutil.ToFloat64(claimsPending.WithLabelValues(cl)) == 1 }, fixture.Timeout, fixture.Tick)
	assert.Eventually(t, func() bool {
		return testutil.ToFloat64(draw.AllocationsTotal.WithLabelValues(cl, "IPv4", draw.ResultPoolExhausted)) >= 1
	}, fixture.Timeout, fixture.Tick, "the exhaustion is counted")

	// The first claim goes, then its address (as the core and the IPAddress
	// controller would do under Delete): the garbage collector removes the
	// placeholder it owned, MetalLB frees the address and hands it on.
	require.NoError(t, k.Delete(ctx, first))
	deleteAddress(firstAddr)

	ph, a := recorded(t, second, iadv1alpha1.FamilyIPv4)
	assertRecorded(t, second, cl, iadv1alpha1.ReclaimRetain, iadv1alpha1.FamilyIPv4, ph, a)
	assert.Equal(t, "ip-10-10-6-5", a.Name)
	assert.Equal(t, string(second.UID), a.Spec.ClaimRef.UID)
	assert.Eventually(t, func() bool { return testutil.ToFloat64(claimsPending.WithLabelValues(cl)) == 0 }, fixture.Timeout, fixture.Tick)
}

// TestPoolNotReady: a claim whose class pool MetalLB does not know yet waits
// with a PoolNotReady warning and proceeds when the pool appears.
func TestPoolNotReady(t *testing.T) {
	ns := namespace(t)
	suite.CreateForTest(t, fixture.Pool("decoy-"+rand.String(4), "10.10.12.0/30")) // MetalLB reports unknown pools only once it has some
	cl := class(t, names.Provisioner, "")
	// Valid parameters: the class is not refused, its pool is merely not
	// rendered yet (no class controller runs in this suite).
	obj := &iadv1alpha1.IPAddressClass{}
	require.NoError(t, k.Get(ctx, client.ObjectKey{Name: cl}, obj))
	obj.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"addresses":["10.10.7.0/30"]}`)}
	require.NoError(t, k.Update(ctx, obj))
	c := claim(t, ns, cl, iadv1alpha1.FamilyIPv4, names.Provisioner)

	ev := suite.WaitEvent(t, fixture.Of(c), ReasonPoolNotReady)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Contains(t, ev.Message, "MetalLB does not know pool iad-"+cl+" (class "+cl+") yet")
	assert.Contains(t, ev.Message, `unknown pool "iad-`+cl+`"`)

	suite.CreateForTest(t, fixture.Pool(cl, "10.10.7.0/30"))
	ph, a := recorded(t, c, iadv1alpha1.FamilyIPv4)
	assertRecorded(t, c, cl, iadv1alpha1.ReclaimRetain, iadv1alpha1.FamilyIPv4, ph, a)
}

// TestMetalLBDownWhileClaimsArrive: claims that arrive while the MetalLB
// controller is down wait, Pending, with an Event saying so once MetalLB
// has been silent for metallbQuiet, and nothing recorded; once MetalLB is back every family is recorded exactly once.
func TestMetalLBDownWhileClaimsArrive(t *testing.T) {
	ns := namespace(t)
	cl := class(t, names.Provisioner, iadv1alpha1.ReclaimDelete, "10.10.13.0/30", "fd00:10:13::/126")
	suite.StopMetalLB()
	t.Cleanup(func() {
		if suite.MetalLB().Exited() {
			_ = suite.StartMetalLB(ctx)
		}
	})
	v4 := claim(t, ns, cl, iadv1alpha1.FamilyIPv4, names.Provisioner)
	dual := claim(t, ns, cl, iadv1alpha1.FamilyDual, names.Provisioner)
	for _, c := range []*iadv1alpha1.IPAddressClaim{v4, dual} {
		ev := suite.WaitEvent(t, fixture.Of(c), ReasonWaitingForMetalLB)
		assert.Equal(t, corev1.EventTypeNormal, ev.Type)
		assert.Contains(t, ev.Message, "Waiting for MetalLB to assign")
	}
	// Nothing can be assigned while MetalLB is down: placeholders wait
	// without an address and nothing is recorded.
	assert.Empty(t, addressesOf(t, v4))
	assert.Empty(t, addressesOf(t, dual))
	for _, ph := range append(placeholdersOf(t, v4), placeholdersOf(t, dual)...) {
		assert.Empty(t, ph.Status.LoadBalancer.Ingress, "placeholder %s", ph.Name)
	}

	require.NoError(t, suite.StartMetalLB(ctx))
	recorded(t, v4, iadv1alpha1.FamilyIPv4)
	recorded(t, dual, iadv1alpha1.FamilyIPv4)
	recorded(t, dual, iadv1alpha1.FamilyIPv6)
	assert.Len(t, addressesOf(t, v4), 1)
	assert.Len(t, placeholdersOf(t, v4), 1)
	assert.Len(t, addressesOf(t, dual), 2)
	assert.Len(t, placeholdersOf(t, dual), 2)
}

// TestOrphanedPlaceholders: allocation placeholders whose claim is gone go,
// unless they back an IPAddress.
func TestOrphanedPlaceholders(t *testing.T) {
	ns := namespace(t)
	cl := class(t, names.Provisioner, "") // no pool: MetalLB never assigns, so nothing gets recorded
	c := claim(t, ns, cl, iadv1alpha1.FamilyIPv4, names.Provisioner)
	key := placeholderKey(c, iadv1alpha1.FamilyIPv4)
	require.Eventually(t, func() bool { return k.Get(ctx, key, &corev1.Service{}) == nil }, fixture.Timeout, fixture.Tick)

	// A placeholder backing an IPAddress of a claim that is gone stays.
	gone := &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone", UID: types.UID(rand.String(8))}}
	kept := draw.RenderAddress(gone, &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: cl}}, "10.10.8.1", "ip-10-10-8-1")
	require.NoError(t, k.Create(ctx, kept))
	t.Cleanup(func() { deleteAddress(kept) })
	backing := draw.RenderPlaceholder(phNS, gone, cl, iadv1alpha1.FamilyIPv4)
	backing.Labels[marks.LabelAddress] = "ip-10-10-8-1"
	require.NoError(t, k.Create(ctx, backing))
	// One for a claim that never existed, backing nothing, goes.
	never := &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "never", UID: types.UID(rand.String(8))}}
	stray := draw.RenderPlaceholder(phNS, never, cl, iadv1alpha1.FamilyIPv6)
	require.NoError(t, k.Create(ctx, stray))

	require.NoError(t, k.Delete(ctx, c))
	suite.WaitGone(t, fixture.Timeout, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, stray)
	assert.NoError(t, k.Get(ctx, client.ObjectKeyFromObject(backing), &corev1.Service{}), "a placeholder backing an IPAddress stays")
}

// TestClaimsNotOurs: claims of another provisioner, and claims naming a
// specific address, are not provisioned; a stamped claim whose class is
// missing or someone else's gets a ClassNotServed warning.
func TestClaimsNotOurs(t *testing.T) {
	ns := namespace(t)
	ours := class(t, names.Provisioner, "", "10.10.9.0/29")
	theirs := class(t, otherProvisioner, "")

	other := claim(t, ns, theirs, iadv1alpha1.FamilyIPv4, otherProvisioner)
	named := &iadv1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "named",
			Annotations: map[string]string{iadv1alpha1.ProvisionerAnnotation: names.Provisioner}},
		Spec: iadv1alpha1.IPAddressClaimSpec{ClassName: ours, AddressName: "ip-10-10-9-1"},
	}
	require.NoError(t, k.Create(ctx, named))
	wrongClass := claim(t, ns, theirs, iadv1alpha1.FamilyIPv4, names.Provisioner)
	noClass := claim(t, ns, "missing-"+rand.String(4), iadv1alpha1.FamilyIPv4, names.Provisioner)

	ev := suite.WaitEvent(t, fixture.Of(wrongClass), ReasonClassNotServed)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Equal(t, fmt.Sprintf("IPAddressClass %q is served by provisioner %q, not by %s; this driver does not provision it",
		theirs, otherProvisioner, names.Provisioner), ev.Message)
	assert.Equal(t, fmt.Sprintf("IPAddressClass %q does not exist; the claim waits until it is created", noClass.Spec.ClassName),
		suite.WaitEvent(t, fixture.Of(noClass), ReasonClassNotServed).Message)

	// A claim of ours created after them is served; by then the others
	// have had their turn and must show nothing.
	sentinel := claim(t, ns, ours, iadv1alpha1.FamilyIPv4, names.Provisioner)
	recorded(t, sentinel, iadv1alpha1.FamilyIPv4)
	for _, c := range []*iadv1alpha1.IPAddressClaim{other, named, wrongClass, noClass} {
		assert.Empty(t, placeholdersOf(t, c), c.Name)
		assert.Empty(t, addressesOf(t, c), c.Name)
		assert.Empty(t, suite.Events(t, fixture.Of(c), ReasonWaitingForMetalLB), c.Name)
	}
	assert.Empty(t, suite.Events(t, fixture.Of(other), ReasonClassNotServed), "not stamped for us: not ours to warn about")
	assert.Empty(t, suite.Events(t, fixture.Of(named), ReasonClassNotServed))
}

// TestWithCore runs the reference core beside the controller: the tenant
// creates a claim, the core stamps it, the driver records an address, and
// the core binds it.
func TestWithCore(t *testing.T) {
	ns := namespace(t)
	cl := class(t, names.Provisioner, "", "10.10.10.0/29", "fd00:aa:10::/124")

	suite.StartCore(t)

	c := claim(t, ns, cl, iadv1alpha1.FamilyDual, "") // the tenant stamps nothing
	cur := &iadv1alpha1.IPAddressClaim{}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.NoError(ct, k.Get(ctx, client.ObjectKeyFromObject(c), cur))
		require.Equal(ct, iadv1alpha1.ClaimBound, cur.Status.Phase)
	}, fixture.Timeout, fixture.Tick, "the claim is never Bound")
	assert.Equal(t, names.Provisioner, cur.Annotations[iadv1alpha1.ProvisionerAnnotation])
	assert.Equal(t, cl, cur.Status.ClassName)
	require.Len(t, cur.Status.Addresses, 2)

	_, a4 := recorded(t, c, iadv1alpha1.FamilyIPv4)
	_, a6 := recorded(t, c, iadv1alpha1.FamilyIPv6)
	assert.ElementsMatch(t, []iadv1alpha1.ClaimedAddress{
		{Name: a4.Name, Address: a4.Spec.Address},
		{Name: a6.Name, Address: a6.Spec.Address},
	}, cur.Status.Addresses)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, a := range addressesOf(ct, c) {
			require.Equal(ct, iadv1alpha1.AddressBound, a.Status.Phase, a.Name)
		}
	}, fixture.Timeout, fixture.Tick)
	assert.Len(t, addressesOf(t, c), 2)

	// Deleting the claim while the core runs lets it release its finalizer.
	require.NoError(t, k.Delete(ctx, cur))
	suite.WaitGone(t, fixture.Timeout, c)
}

// TestRetargetedPendingClaim: a Pending claim whose spec.className is
// changed is provisioned from the class it names now, as the core reads it
// (spec before status), and the placeholder that was waiting in the old
// class is deleted; retargeted to a class that does not exist, it keeps no
// placeholder at all.
func TestRetargetedPendingClaim(t *testing.T) {
	ns := namespace(t)
	full, pending := exhausted(t, ns, "10.10.7.5/32")
	// The placeholder waiting in the full class, read when it exists: a pass
	// may be drawing it again at this moment.
	old := &corev1.Service{}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.NoError(ct, k.Get(ctx, placeholderKey(pending, iadv1alpha1.FamilyIPv4), old))
	}, fixture.Timeout, fixture.Tick, "the waiting claim's placeholder")
	// The core's sticky record of the class the claim was resolved to.
	orig := pending.DeepCopy()
	pending.Status.ClassName = full
	require.NoError(t, k.Status().Patch(ctx, pending, client.MergeFrom(orig)))

	retarget := func(class string) {
		t.Helper()
		require.NoError(t, k.Get(ctx, client.ObjectKeyFromObject(pending), pending))
		orig := pending.DeepCopy()
		pending.Spec.ClassName = class
		require.NoError(t, k.Patch(ctx, pending, client.MergeFrom(orig)))
	}
	// A class that does not exist: the old placeholder goes, nothing else comes.
	retarget("no-such-class-" + rand.String(4))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ph := &corev1.Service{}
		err := k.Get(ctx, placeholderKey(pending, iadv1alpha1.FamilyIPv4), ph)
		assert.True(ct, apierrors.IsNotFound(err) || ph.UID != old.UID, "the old class's placeholder is deleted: %v", err)
		assert.True(ct, apierrors.IsNotFound(err), "no placeholder for a class that does not exist")
	}, fixture.Timeout, fixture.Tick)
	suite.WaitEvent(t, fixture.Of(pending), ReasonRetargeted)

	// A class with room: provisioned from it.
	roomy := class(t, names.Provisioner, "", "10.10.7.9/32")
	retarget(roomy)
	ph, a := recorded(t, pending, iadv1alpha1.FamilyIPv4)
	assert.Equal(t, "10.10.7.9", a.Spec.Address)
	assert.Equal(t, roomy, a.Spec.ClassName)
	assert.NotEqual(t, old.UID, ph.UID)
}
