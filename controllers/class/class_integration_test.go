//go:build integration

package class

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// The integration suite runs the class controller in-process, as its own
// ServiceAccount with the generated RBAC, against the real local control
// plane: the API server, kube-controller-manager's garbage collector and the
// real MetalLB controller, which must accept every rendered pool.
//
// Each test uses its own class names and its own slice of the documentation
// ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32), so
// no two tests' classes overlap.

var (
	suite *fixture.Suite
	c     *cluster.Cluster
)

const (
	mlbNS     = cluster.MetalLBNamespace
	serviceNS = "class-it"
	gcTimeout = 90 * time.Second
)

func TestMain(m *testing.M) {
	fixture.Main(m, fixture.Options{Controller: Controller, Namespaces: []string{serviceNS}}, func(s *fixture.Suite) {
		suite, c = s, s.Cluster
	})
}

// --- helpers ---

func params(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

// createClass creates a class with the given provisioner and parameters and
// deletes it when the test ends.
func createClass(t *testing.T, name, provisioner, raw string) *iadv1alpha1.IPAddressClass {
	t.Helper()
	cl := cluster.Class(name, "", raw)
	cl.Spec.Provisioner = provisioner
	suite.CreateForTest(t, cl)
	return cl
}

// ourClass creates a class served by the driver.
func ourClass(t *testing.T, name, raw string) *iadv1alpha1.IPAddressClass {
	t.Helper()
	return createClass(t, name, names.Provisioner, raw)
}

// setParams replaces a class's parameters.
func setParams(t *testing.T, name, raw string) {
	t.Helper()
	ctx := context.Background()
	cl := &iadv1alpha1.IPAddressClass{}
	require.NoError(t, c.Client.Get(ctx, types.NamespacedName{Name: name}, cl))
	orig := cl.DeepCopy()
	cl.Spec.Parameters = params(raw)
	require.NoError(t, c.Client.Patch(ctx, cl, client.MergeFrom(orig)))
}

func key(class string) types.NamespacedName {
	return types.NamespacedName{Namespace: mlbNS, Name: names.PoolName(class)}
}

// waitPool waits until the class's pool holds exactly addresses and returns it.
func waitPool(t *testing.T, class string, addresses ...string) *metallbv1beta1.IPAddressPool {
	t.Helper()
	return waitPoolWithin(t, class, fixture.Timeout, addresses...)
}

func waitL2(t *testing.T, class string) *metallbv1beta1.L2Advertisement {
	t.Helper()
	adv := &metallbv1beta1.L2Advertisement{}
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		require.NoError(t, c.Client.Get(context.Background(), key(class), adv))
	}, fixture.Timeout, fixture.Tick, "L2Advertisement %s exists", names.PoolName(class))
	return adv
}

// waitEvent waits for an Event on the class with exactly this type, reason and message.
func waitEvent(t *testing.T, class, typ, reason, message string) {
	t.Helper()
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		events := suite.Events(t, fixture.About{Kind: "IPAddressClass", Name: class}, reason)
		var messages []string
		for _, e := range events {
			if e.Type == typ {
				messages = append(messages, e.Message)
			}
		}
		assert.Contains(t, messages, message)
	}, fixture.Timeout, fixture.Tick, "%s Event %s on class %s", typ, reason, class)
}

// loadBalancer creates a single-stack LoadBalancer Service drawing from pool
// and returns the address MetalLB assigns it.
func loadBalancer(t *testing.T, name, pool string, family corev1.IPFamily) netip.Addr {
	t.Helper()
	svc := fixture.LoadBalancer(serviceNS, name, map[string]string{marks.KeyPool: pool}, family)
	// The grant label, as the driver sets it: the class pools admit only
	// Services carrying it.
	svc.Labels = map[string]string{marks.LabelGrant: strings.TrimPrefix(pool, names.PoolName(""))}
	suite.CreateForTest(t, svc)
	ip, err := netip.ParseAddr(suite.WaitAssigned(t, svc))
	require.NoError(t, err)
	return ip
}

// waitSeries waits until the class's series of vec are exactly want
// (keyed by their other labels).
func waitSeries(t *testing.T, vec *prometheus.GaugeVec, class string, want map[string]float64) {
	t.Helper()
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.Equal(t, want, series(vec, of(class)))
	}, fixture.Timeout, fixture.Tick)
}

func inRange(t *testing.T, ip netip.Addr, r string) {
	t.Helper()
	ar, err := classparams.ParseAddressRange(r)
	require.NoError(t, err)
	assert.True(t, ar.Start.Compare(ip) <= 0 && ip.Compare(ar.End) <= 0, "%s is in %s", ip, r)
}

func wantMeta(t *testing.T, obj metav1.Object, class *iadv1alpha1.IPAddressClass) {
	t.Helper()
	assert.Equal(t, map[string]string{
		"app.kubernetes.io/managed-by":                 "metallb-iad",
		"metallb.drivers.local.sdn.cozystack.io/class": class.Name,
	}, obj.GetLabels())
	assert.Empty(t, obj.GetOwnerReferences(), "no owner reference: what is rendered outlives the class while its addresses do")
}

// --- tests ---

// TestRenderL2 renders a CIDR class into a pool and an L2Advertisement, and
// the real MetalLB controller hands out an address from it.
func TestRenderL2(t *testing.T) {
	cl := ourClass(t, "render-l2", `{"addresses": ["192.0.2.0/28"], "avoidBuggyIPs": true}`)

	pool := waitPool(t, cl.Name, "192.0.2.0/28")
	wantMeta(t, pool, cl)
	assert.Equal(t, metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.0/28"}, AutoAssign: ptr.To(false), AvoidBuggyIPs: true,
		AllocateTo: &metallbv1beta1.ServiceAllocation{ServiceSelectors: []metav1.LabelSelector{marks.GrantSelector(cl.Name)}}}, pool.Spec,
		"a new class's pool admits only Services the driver granted")

	adv := waitL2(t, cl.Name)
	wantMeta(t, adv, cl)
	assert.Equal(t, metallbv1beta1.L2AdvertisementSpec{IPAddressPools: []string{"iad-render-l2"}}, adv.Spec)

	waitEvent(t, cl.Name, corev1.EventTypeNormal, ReasonRendered,
		"IPAddressPool metallb-system/iad-render-l2 with 192.0.2.0/28, announced by L2Advertisement iad-render-l2: created IPAddressPool iad-render-l2, created L2Advertisement iad-render-l2")
	waitSeries(t, renderedClasses, cl.Name, map[string]float64{"": 1})
	waitSeries(t, classAddresses, cl.Name, map[string]float64{"family=IPv4 ": 16, "family=IPv6 ": 0})

	ip := loadBalancer(t, "render-l2", "iad-render-l2", corev1.IPv4Protocol)
	inRange(t, ip, "192.0.2.0/28")
	assert.NotEqual(t, netip.MustParseAddr("192.0.2.0"), ip, "avoidBuggyIPs reached MetalLB: no .0 address")

	// No Service outside the class's pool gets its addresses: the pool is manual.
	assert.Equal(t, ptr.To(false), pool.Spec.AutoAssign)
}

// TestRenderRange renders a MetalLB range and MetalLB assigns from it.
func TestRenderRange(t *testing.T) {
	cl := ourClass(t, "render-range", `{"addresses": [" 192.0.2.16 - 192.0.2.20 "]}`)
	pool := waitPool(t, cl.Name, "192.0.2.16-192.0.2.20")
	wantMeta(t, pool, cl)
	waitL2(t, cl.Name)
	waitSeries(t, classAddresses, cl.Name, map[string]float64{"family=IPv4 ": 5, "family=IPv6 ": 0})
	inRange(t, loadBalancer(t, "render-range", "iad-render-range", corev1.IPv4Protocol), "192.0.2.16-192.0.2.20")
}

// TestRenderIPv6 renders IPv6 ranges and MetalLB assigns an IPv6 address to
// a single-stack IPv6 Service.
func TestRenderIPv6(t *testing.T) {
	cl := ourClass(t, "render-v6", `{"addresses": ["2001:DB8:10::/120", "2001:db8:11::10-2001:db8:11::1f"]}`)
	waitPool(t, cl.Name, "2001:db8:10::/120", "2001:db8:11::10-2001:db8:11::1f")
	waitL2(t, cl.Name)
	waitSeries(t, classAddresses, cl.Name, map[string]float64{"family=IPv4 ": 0, "family=IPv6 ": 256 + 16})
	ip := loadBalancer(t, "render-v6", "iad-render-v6", corev1.IPv6Protocol)
	assert.True(t, ip.Is6(), "got %s", ip)
	r1, _ := classparams.ParseAddressRange("2001:db8:10::/120")
	r2, _ := classparams.ParseAddressRange("2001:db8:11::10-2001:db8:11::1f")
	in := func(r classparams.AddressRange) bool { return r.Start.Compare(ip) <= 0 && ip.Compare(r.End) <= 0 }
	assert.True(t, in(r1) || in(r2), "%s is in the class's ranges", ip)
}

// TestUpdateInPlace edits a class: the same pool and advertisement objects
// are patched, never recreated.
func TestUpdateInPlace(t *testing.T) {
	cl := ourClass(t, "update", `{"addresses": ["192.0.2.32/28"]}`)
	before := waitPool(t, cl.Name, "192.0.2.32/28")
	advBefore := waitL2(t, cl.Name)

	setParams(t, cl.Name, `{"addresses": ["192.0.2.32/28", "192.0.2.48-192.0.2.50"], "avoidBuggyIPs": true}`)
	after := waitPool(t, cl.Name, "192.0.2.32/28", "192.0.2.48-192.0.2.50")
	assert.Equal(t, before.UID, after.UID, "the pool is patched in place")
	assert.True(t, after.Spec.AvoidBuggyIPs)
	advAfter := waitL2(t, cl.Name)
	assert.Equal(t, advBefore.UID, advAfter.UID)
	waitEvent(t, cl.Name, corev1.EventTypeNormal, ReasonRendered,
		"IPAddressPool metallb-system/iad-update with 192.0.2.32/28, 192.0.2.48-192.0.2.50, announced by L2Advertisement iad-update: updated IPAddressPool iad-update")
	waitSeries(t, classAddresses, cl.Name, map[string]float64{"family=IPv4 ": 19, "family=IPv6 ": 0})

	// MetalLB accepts the new range too.
	inRange(t, loadBalancer(t, "update", "iad-update", corev1.IPv4Protocol), "192.0.2.32-192.0.2.50")
}

// TestDriftRepair edits and deletes rendered objects by hand; the
// controller puts them back.
func TestDriftRepair(t *testing.T) {
	ctx := context.Background()
	cl := ourClass(t, "drift", `{"addresses": ["192.0.2.64/28"]}`)
	pool := waitPool(t, cl.Name, "192.0.2.64/28")
	uid := pool.UID

	// A hand edit of the addresses, autoAssign and the grant selector is
	// reverted in place.
	orig := pool.DeepCopy()
	pool.Spec.Addresses = []string{"192.0.2.64/29"}
	pool.Spec.AutoAssign = ptr.To(true)
	pool.Spec.AllocateTo = nil
	require.NoError(t, c.Client.Patch(ctx, pool, client.MergeFrom(orig)))
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		got := &metallbv1beta1.IPAddressPool{}
		require.NoError(t, c.Client.Get(ctx, key(cl.Name), got))
		assert.Equal(t, []string{"192.0.2.64/28"}, got.Spec.Addresses)
		assert.Equal(t, ptr.To(false), got.Spec.AutoAssign)
		assert.True(t, marks.RequiresGrant(got, cl.Name), "the pool admits only granted Services again")
		assert.Equal(t, uid, got.UID)
	}, fixture.Timeout, fixture.Tick, "the hand edit of the pool is reverted")

	// Stripped labels come back; a foreign label stays.
	pool = &metallbv1beta1.IPAddressPool{}
	require.NoError(t, c.Client.Get(ctx, key(cl.Name), pool))
	orig = pool.DeepCopy()
	pool.Labels = map[string]string{"team": "net"}
	require.NoError(t, c.Client.Patch(ctx, pool, client.MergeFrom(orig)))
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		got := &metallbv1beta1.IPAddressPool{}
		require.NoError(t, c.Client.Get(ctx, key(cl.Name), got))
		assert.Equal(t, map[string]string{"team": "net", marks.LabelManagedBy: ManagedBy, marks.KeyClass: cl.Name}, got.Labels)
	}, fixture.Timeout, fixture.Tick, "labels are restored")

	// A deleted advertisement is recreated; a hand edit of it is reverted.
	adv := waitL2(t, cl.Name)
	require.NoError(t, c.Client.Delete(ctx, adv))
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		got := &metallbv1beta1.L2Advertisement{}
		require.NoError(t, c.Client.Get(ctx, key(cl.Name), got))
		assert.NotEqual(t, adv.UID, got.UID, "a new advertisement")
		assert.Equal(t, []string{"iad-drift"}, got.Spec.IPAddressPools)
	}, fixture.Timeout, fixture.Tick, "the deleted advertisement is recreated")
	adv = waitL2(t, cl.Name)
	orig2 := adv.DeepCopy()
	adv.Spec.IPAddressPools = nil
	adv.Spec.IPAddressPoolSelectors = []metav1.LabelSelector{{}}
	require.NoError(t, c.Client.Patch(ctx, adv, client.MergeFrom(orig2)))
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		got := &metallbv1beta1.L2Advertisement{}
		require.NoError(t, c.Client.Get(ctx, key(cl.Name), got))
		assert.Equal(t, metallbv1beta1.L2AdvertisementSpec{IPAddressPools: []string{"iad-drift"}}, got.Spec)
	}, fixture.Timeout, fixture.Tick, "the hand edit of the advertisement is reverted")

	// A deleted pool is recreated.
	pool = &metallbv1beta1.IPAddressPool{}
	require.NoError(t, c.Client.Get(ctx, key(cl.Name), pool))
	require.NoError(t, c.Client.Delete(ctx, pool))
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		got := &metallbv1beta1.IPAddressPool{}
		require.NoError(t, c.Client.Get(ctx, key(cl.Name), got))
		assert.NotEqual(t, pool.UID, got.UID)
		assert.Equal(t, []string{"192.0.2.64/28"}, got.Spec.Addresses)
		assert.True(t, marks.RequiresGrant(got, cl.Name), "with the grant selector")
	}, fixture.Timeout, fixture.Tick, "the deleted pool is recreated")
}

// TestClassDeletion deletes a class no address is recorded under: its pool
// and advertisement are withdrawn.
func TestClassDeletion(t *testing.T) {
	cl := ourClass(t, "gc", `{"addresses": ["192.0.2.96/28"]}`)
	pool := waitPool(t, cl.Name, "192.0.2.96/28")
	adv := waitL2(t, cl.Name)
	require.NoError(t, c.Client.Delete(context.Background(), cl))
	suite.WaitGone(t, gcTimeout, pool)
	suite.WaitGone(t, gcTimeout, adv)
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.Empty(t, series(renderedClasses, of(cl.Name)))
		assert.Empty(t, series(classAddresses, of(cl.Name)))
	}, fixture.Timeout, fixture.Tick, "the class's metrics are dropped")
}

// ledgerAddress creates an IPAddress of a class, as a driver records one.
func ledgerAddress(t *testing.T, class, ip string) *iadv1alpha1.IPAddress {
	t.Helper()
	a := fixture.IPAddress(t, class, ip, nil)
	a.Spec.ReclaimPolicy = iadv1alpha1.ReclaimRetain
	suite.CreateForTest(t, a)
	return a
}

// TestDroppingAnAddressWaitsForIt: an edit whose range leaves out an
// address of the ledger is refused (AddressesInUse), the previous range
// kept, while addresses of a class rendered as it is come and go unheeded;
// the address's deletion alone brings the refused class back, rendered as
// edited.
func TestDroppingAnAddressWaitsForIt(t *testing.T) {
	ctx := context.Background()
	cl := ourClass(t, "dropwait", `{"addresses": ["192.0.2.176/29"]}`)
	waitPool(t, cl.Name, "192.0.2.176/29")
	a := ledgerAddress(t, cl.Name, "192.0.2.177")
	other := ledgerAddress(t, cl.Name, "192.0.2.178")
	require.NoError(t, c.Client.Delete(ctx, other))

	setParams(t, cl.Name, `{"addresses": ["192.0.2.180/30"]}`)
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		events := suite.Events(t, fixture.About{Kind: "IPAddressClass", Name: cl.Name}, ReasonAddressesInUse)
		require.NotEmpty(t, events)
		assert.Contains(t, events[len(events)-1].Message, a.Name, "the Warning names the address")
	}, fixture.Timeout, fixture.Tick, "the edit is refused")
	waitPool(t, cl.Name, "192.0.2.176/29")

	require.NoError(t, c.Client.Delete(ctx, a))
	waitPool(t, cl.Name, "192.0.2.180/30")
}

// TestClassDeletionKeepsItsAddresses deletes a class with addresses
// recorded under its name: the pool stays, narrowed to those addresses and
// saying why, the advertisement stays, a class created again with the name
// takes both over (the same objects), and both go with the last address.
func TestClassDeletionKeepsItsAddresses(t *testing.T) {
	ctx := context.Background()
	cl := ourClass(t, "keep", `{"addresses": ["192.0.2.160/28", "2001:db8:16::/120"], "avoidBuggyIPs": true}`)
	pool := waitPool(t, cl.Name, "192.0.2.160/28", "2001:db8:16::/120")
	adv := waitL2(t, cl.Name)
	a1 := ledgerAddress(t, cl.Name, "192.0.2.161")
	a2 := ledgerAddress(t, cl.Name, "2001:db8:16::5")
	outside := ledgerAddress(t, cl.Name, "198.51.100.77") // not in the pool: not added back

	require.NoError(t, c.Client.Delete(ctx, cl))
	waitRetained := func(msg string, entries ...string) {
		t.Helper()
		require.EventuallyWithT(t, func(t *assert.CollectT) {
			got := &metallbv1beta1.IPAddressPool{}
			require.NoError(t, c.Client.Get(ctx, key(cl.Name), got))
			assert.Equal(t, pool.UID, got.UID, "the same pool")
			assert.Equal(t, entries, got.Spec.Addresses)
			assert.False(t, got.Spec.AvoidBuggyIPs)
			assert.Equal(t, ptr.To(false), got.Spec.AutoAssign)
			assert.Equal(t, RetainedMessage(cl.Name, entries), got.Annotations[marks.KeyRetained])
			l2 := &metallbv1beta1.L2Advertisement{}
			require.NoError(t, c.Client.Get(ctx, key(cl.Name), l2))
			assert.Equal(t, adv.UID, l2.UID, "the same advertisement")
		}, fixture.Timeout, fixture.Tick, msg)
	}
	waitRetained("the pool is narrowed to the class's addresses", "192.0.2.161/32", "2001:db8:16::5/128")
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		var evs corev1.EventList
		require.NoError(t, c.Client.List(ctx, &evs, client.InNamespace(mlbNS)))
		found := false
		for _, e := range evs.Items {
			found = found || (e.InvolvedObject.UID == pool.UID && e.Reason == ReasonRetained)
		}
		assert.True(t, found, "a Retained Event on the pool")
	}, fixture.Timeout, fixture.Tick)

	// A restart keeps it as it is.
	suite.Restart(t, nil)
	waitRetained("a restarted controller keeps the pool", "192.0.2.161/32", "2001:db8:16::5/128")

	// The class is created again: it takes the same objects over.
	cl = ourClass(t, "keep", `{"addresses": ["192.0.2.160/28", "2001:db8:16::/120"], "avoidBuggyIPs": true}`)
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		got := &metallbv1beta1.IPAddressPool{}
		require.NoError(t, c.Client.Get(ctx, key(cl.Name), got))
		assert.Equal(t, pool.UID, got.UID)
		assert.Equal(t, []string{"192.0.2.160/28", "2001:db8:16::/120"}, got.Spec.Addresses)
		assert.True(t, got.Spec.AvoidBuggyIPs)
		assert.NotContains(t, got.Annotations, marks.KeyRetained)
	}, fixture.Timeout, fixture.Tick, "the class created again takes the pool over")

	// Deleted again: narrowed as the addresses go, withdrawn with the last.
	require.NoError(t, c.Client.Delete(ctx, cl))
	waitRetained("narrowed again", "192.0.2.161/32", "2001:db8:16::5/128")
	require.NoError(t, c.Client.Delete(ctx, a1))
	waitRetained("narrowed to the address left", "2001:db8:16::5/128")
	require.NoError(t, c.Client.Delete(ctx, a2))
	suite.WaitGone(t, fixture.Timeout, pool)
	suite.WaitGone(t, fixture.Timeout, adv)
	_ = outside
}

// TestBGP switches a class from L2 to BGP and back: the advertisement of the
// old kind is removed, the pool stays the same object.
func TestBGP(t *testing.T) {
	ctx := context.Background()
	cl := ourClass(t, "bgp", `{"addresses": ["192.0.2.128/28"]}`)
	pool := waitPool(t, cl.Name, "192.0.2.128/28")
	l2 := waitL2(t, cl.Name)

	setParams(t, cl.Name, `{"addresses": ["192.0.2.128/28"], "advertisement": "BGP",
		"bgp": {"peers": ["tor-a", "tor-b"], "communities": ["65000:100", "large:1:2:3"], "localPref": 150, "aggregationLength": 28, "aggregationLengthV6": 120}}`)
	bgp := &metallbv1beta1.BGPAdvertisement{}
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		require.NoError(t, c.Client.Get(ctx, key(cl.Name), bgp))
	}, fixture.Timeout, fixture.Tick, "the BGPAdvertisement is rendered")
	wantMeta(t, bgp, cl)
	assert.Equal(t, metallbv1beta1.BGPAdvertisementSpec{
		IPAddressPools:      []string{"iad-bgp"},
		Peers:               []string{"tor-a", "tor-b"},
		Communities:         []string{"65000:100", "large:1:2:3"},
		LocalPref:           150,
		AggregationLength:   ptr.To[int32](28),
		AggregationLengthV6: ptr.To[int32](120),
	}, bgp.Spec)
	suite.WaitGone(t, fixture.Timeout, l2)
	waitEvent(t, cl.Name, corev1.EventTypeNormal, ReasonRendered,
		"IPAddressPool metallb-system/iad-bgp with 192.0.2.128/28, announced by BGPAdvertisement iad-bgp: created BGPAdvertisement iad-bgp, removed L2Advertisement iad-bgp")
	got := &metallbv1beta1.IPAddressPool{}
	require.NoError(t, c.Client.Get(ctx, key(cl.Name), got))
	assert.Equal(t, pool.UID, got.UID)

	// MetalLB accepts the BGP configuration: the pool still hands out addresses.
	inRange(t, loadBalancer(t, "bgp", "iad-bgp", corev1.IPv4Protocol), "192.0.2.128/28")

	// Back to L2.
	setParams(t, cl.Name, `{"addresses": ["192.0.2.128/28"], "l2": {"interfaces": ["eth0"]}}`)
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		adv := &metallbv1beta1.L2Advertisement{}
		require.NoError(t, c.Client.Get(ctx, key(cl.Name), adv))
		assert.Equal(t, metallbv1beta1.L2AdvertisementSpec{IPAddressPools: []string{"iad-bgp"}, Interfaces: []string{"eth0"}}, adv.Spec)
	}, fixture.Timeout, fixture.Tick, "the L2Advertisement is rendered again")
	suite.WaitGone(t, fixture.Timeout, bgp)
}

// TestOtherProvisioner: a class of another driver renders nothing, and
// objects labelled as rendered for it are removed.
func TestOtherProvisioner(t *testing.T) {
	ctx := context.Background()
	// Leftovers, as if the name had once belonged to a class of ours.
	stalePool := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: mlbNS, Name: "iad-foreign", Labels: RenderedLabels("foreign")},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.192/28"}, AutoAssign: ptr.To(false)},
	}
	require.NoError(t, c.Client.Create(ctx, stalePool))
	staleAdv := &metallbv1beta1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Namespace: mlbNS, Name: "iad-foreign", Labels: RenderedLabels("foreign")},
		Spec:       metallbv1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"iad-foreign"}},
	}
	require.NoError(t, c.Client.Create(ctx, staleAdv))
	// An object of someone else in the namespace is left alone.
	bystander := &metallbv1beta1.L2Advertisement{
		ObjectMeta: metav1.ObjectMeta{Namespace: mlbNS, Name: "iad-foreign", Labels: map[string]string{marks.KeyClass: "foreign"}},
	}
	require.NoError(t, c.Client.Create(ctx, bystander))
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), bystander) })

	createClass(t, "foreign", "other.example.com", `{"addresses": ["192.0.2.192/28"]}`)
	suite.WaitGone(t, fixture.Timeout, stalePool)
	suite.WaitGone(t, fixture.Timeout, staleAdv)

	// Nothing is rendered for it, and the bystander stays.
	assert.Never(t, func() bool {
		return !apierrors.IsNotFound(c.Client.Get(ctx, key("foreign"), &metallbv1beta1.IPAddressPool{})) ||
			c.Client.Get(ctx, key("foreign"), &metallbv1beta1.L2Advertisement{}) != nil
	}, 2*time.Second, fixture.Tick)
	events := suite.Events(t, fixture.About{Kind: "IPAddressClass", Name: "foreign"}, ReasonRendered)
	assert.Empty(t, events)
	assert.Empty(t, series(renderedClasses, of("foreign")))
	assert.Empty(t, series(refusedClasses, of("foreign")))
}

// TestRestart stops the controller and starts a new one: the rendering is
// left exactly as it was.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	cl := ourClass(t, "restart", `{"addresses": ["192.0.2.160/28"], "advertisement": "BGP"}`)
	pool := waitPool(t, cl.Name, "192.0.2.160/28")
	adv := &metallbv1beta1.BGPAdvertisement{}
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		require.NoError(t, c.Client.Get(ctx, key(cl.Name), adv))
	}, fixture.Timeout, fixture.Tick)
	// Let MetalLB settle the pool's status before taking the resourceVersion.
	inRange(t, loadBalancer(t, "restart", "iad-restart", corev1.IPv4Protocol), "192.0.2.160/28")
	require.NoError(t, c.Client.Get(ctx, key(cl.Name), pool))

	suite.Restart(t, func() { forget(cl.Name) }) // the new manager must set the series again

	// The new controller reconciled the class.
	waitSeries(t, renderedClasses, cl.Name, map[string]float64{"": 1})
	gotPool := &metallbv1beta1.IPAddressPool{}
	require.NoError(t, c.Client.Get(ctx, key(cl.Name), gotPool))
	assert.Equal(t, pool.UID, gotPool.UID)
	assert.Equal(t, pool.Spec, gotPool.Spec)
	assert.Equal(t, pool.Generation, gotPool.Generation, "the pool's spec was not written")
	gotAdv := &metallbv1beta1.BGPAdvertisement{}
	require.NoError(t, c.Client.Get(ctx, key(cl.Name), gotAdv))
	assert.Equal(t, adv.UID, gotAdv.UID)
	assert.Equal(t, adv.ResourceVersion, gotAdv.ResourceVersion, "the advertisement was not written")
	events := suite.Events(t, fixture.About{Kind: "IPAddressClass", Name: cl.Name}, ReasonRendered)
	assert.Len(t, events, 1, "only the first rendering changed anything")
}

// TestBadParameters edits rendered classes into every kind of bad input:
// each gets a Warning Event naming the problem, and the previous rendering
// stays exactly as it was.
func TestBadParameters(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, params, message string
	}{
		{"bad-cidr", `{"addresses": ["198.51.100.0/33"]}`,
			`spec.parameters.addresses[0]: "198.51.100.0/33" is not a valid CIDR`},
		{"bad-hostbits", `{"addresses": ["198.51.100.17/28"]}`,
			`spec.parameters.addresses[0]: "198.51.100.17/28" has host bits set; the network is 198.51.100.16/28`},
		{"bad-range", `{"addresses": ["198.51.100.32-198.51.100.x"]}`,
			`spec.parameters.addresses[0]: "198.51.100.32-198.51.100.x" is not a valid range: its end "198.51.100.x" is not an IP address`},
		{"bad-reversed", `{"addresses": ["198.51.100.60-198.51.100.50"]}`,
			`spec.parameters.addresses[0]: "198.51.100.60-198.51.100.50" is reversed: its start 198.51.100.60 is after its end 198.51.100.50`},
		{"bad-mixed", `{"addresses": ["198.51.100.64-2001:db8::1"]}`,
			`spec.parameters.addresses[0]: "198.51.100.64-2001:db8::1" mixes IPv4 and IPv6: both ends of a range must be of one family`},
		{"bad-empty", `{"addresses": []}`,
			`spec.parameters.addresses is required: list at least one CIDR or range, e.g. ["192.0.2.0/24"]`},
		{"bad-advertisement", `{"addresses": ["198.51.100.96/28"], "advertisement": "OSPF"}`,
			`spec.parameters.advertisement: "OSPF" is not supported; use "L2" (the default) or "BGP"`},
		{"bad-key", `{"addresses": ["198.51.100.112/28"], "autoAssign": true}`,
			`spec.parameters: unknown key "autoAssign"`},
		{"bad-bgp-key", `{"addresses": ["198.51.100.128/28"], "advertisement": "BGP", "bgp": {"peer": "tor-a"}}`,
			`spec.parameters.bgp: unknown key "peer"`},
		{"bad-type", `{"addresses": ["198.51.100.144/28"], "avoidBuggyIPs": "yes"}`,
			`spec.parameters.avoidBuggyIPs: expected true or false, got a string`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			good := fmt.Sprintf("198.51.100.%d/28", 16*i)
			cl := ourClass(t, tt.name, fmt.Sprintf(`{"addresses": [%q]}`, good))
			before := waitPool(t, cl.Name, good)
			advBefore := waitL2(t, cl.Name)

			setParams(t, cl.Name, tt.params)
			waitEvent(t, cl.Name, corev1.EventTypeWarning, ReasonInvalidParameters, tt.message)
			waitSeries(t, refusedClasses, cl.Name, map[string]float64{"reason=InvalidParameters ": 1})
			assert.Empty(t, series(renderedClasses, of(cl.Name)), "the class is not counted as rendered")

			after := &metallbv1beta1.IPAddressPool{}
			require.NoError(t, c.Client.Get(ctx, key(cl.Name), after))
			assert.Equal(t, before.UID, after.UID)
			assert.Equal(t, before.Spec, after.Spec, "the previous rendering is kept")
			assert.Equal(t, before.Generation, after.Generation)
			advAfter := &metallbv1beta1.L2Advertisement{}
			require.NoError(t, c.Client.Get(ctx, key(cl.Name), advAfter))
			assert.Equal(t, advBefore.ResourceVersion, advAfter.ResourceVersion)
			assert.True(t, apierrors.IsNotFound(c.Client.Get(ctx, key(cl.Name), &metallbv1beta1.BGPAdvertisement{})))

			// Fixing the parameters renders again and clears the refusal.
			setParams(t, cl.Name, fmt.Sprintf(`{"addresses": [%q], "avoidBuggyIPs": true}`, good))
			require.EventuallyWithT(t, func(t *assert.CollectT) {
				got := &metallbv1beta1.IPAddressPool{}
				require.NoError(t, c.Client.Get(ctx, key(cl.Name), got))
				assert.True(t, got.Spec.AvoidBuggyIPs)
			}, fixture.Timeout, fixture.Tick)
			require.EventuallyWithT(t, func(t *assert.CollectT) {
				assert.Empty(t, series(refusedClasses, of(cl.Name)))
				assert.Equal(t, map[string]float64{"": 1}, series(renderedClasses, of(cl.Name)))
			}, fixture.Timeout, fixture.Tick, "the refusal is cleared")
		})
	}
}

// squat creates, in the MetalLB namespace, an L2Advertisement named name
// and controlled by a ConfigMap named owner (deleted when the test ends).
func squat(t *testing.T, name, owner string) *metallbv1beta1.L2Advertisement {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: mlbNS, Name: owner}}
	require.NoError(t, c.Client.Create(ctx, cm))
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), cm) })
	squatter := &metallbv1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{
		Namespace: mlbNS, Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: ptr.To(true)}},
	}}
	require.NoError(t, c.Client.Create(ctx, squatter))
	return squatter
}

// TestPoolNameTaken refuses a class whose advertisement name is held by an
// object someone else controls; nothing is rendered half-way, and the class
// is rendered once the name is free.
func TestPoolNameTaken(t *testing.T) {
	ctx := context.Background()
	squatter := squat(t, "iad-taken", "taken-owner")

	ourClass(t, "taken", `{"addresses": ["203.0.113.16/28"]}`)
	waitEvent(t, "taken", corev1.EventTypeWarning, ReasonPoolNameTaken,
		"cannot render L2Advertisement metallb-system/iad-taken: it is controlled by ConfigMap taken-owner already")
	assert.True(t, apierrors.IsNotFound(c.Client.Get(ctx, key("taken"), &metallbv1beta1.IPAddressPool{})), "no pool without its advertisement")

	require.NoError(t, c.Client.Delete(ctx, squatter))
	waitPool(t, "taken", "203.0.113.16/28")
	adv := waitL2(t, "taken")
	assert.NotEqual(t, squatter.UID, adv.UID)
	assert.Equal(t, []string{"iad-taken"}, adv.Spec.IPAddressPools)
}

// cacheBehind is a cache that has not yet seen any MetalLB object.
type cacheBehind struct{ client.Client }

func (b cacheBehind) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch obj.(type) {
	case *metallbv1beta1.IPAddressPool, *metallbv1beta1.L2Advertisement, *metallbv1beta1.BGPAdvertisement:
		return apierrors.NewNotFound(metallbv1beta1.GroupVersion.WithResource("unknown").GroupResource(), key.Name)
	}
	return b.Client.Get(ctx, key, obj, opts...)
}

// List finds no MetalLB pool and no class.
func (b cacheBehind) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	switch list.(type) {
	case *metallbv1beta1.IPAddressPoolList, *iadv1alpha1.IPAddressClassList:
		return nil
	}
	return b.Client.List(ctx, list, opts...)
}

// TestOverlapLooksPastTheCache: a pool created by someone else a moment
// before the class, and an older class the cache has not seen yet, still
// refuse the class's pool: before a pool's ranges change the overlap is
// looked for on the API server.
func TestOverlapLooksPastTheCache(t *testing.T) {
	ctx := context.Background()
	live := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: mlbNS, Name: "lagging-plain"},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"203.0.113.224/28"}},
	}
	require.NoError(t, c.Client.Create(ctx, live))
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), live) })
	older := ourClass(t, "lagging-older", `{"addresses": ["198.51.100.224/28"]}`)
	waitPool(t, older.Name, "198.51.100.224/28")
	r := &Reconciler{Deps: bootstrap.Deps{Client: cacheBehind{c.Client}, APIReader: c.Client, MetalLBNamespace: mlbNS}}

	for _, tc := range []struct{ addresses, want string }{
		{"203.0.113.232/29", "addresses 203.0.113.232/29 overlap 203.0.113.224/28 of IPAddressPool lagging-plain (not rendered by this driver)"},
		{"198.51.100.232/29", `addresses 198.51.100.232/29 overlap 198.51.100.224/28 of the older class "lagging-older"`},
	} {
		class := &iadv1alpha1.IPAddressClass{
			ObjectMeta: metav1.ObjectMeta{Name: "lagging-younger", UID: "lagging-younger-uid", CreationTimestamp: metav1.Now()},
			Spec:       iadv1alpha1.IPAddressClassSpec{Provisioner: names.Provisioner, Parameters: params(`{"addresses": ["` + tc.addresses + `"]}`)},
		}
		_, ref, err := r.judge(ctx, class)
		require.NoError(t, err)
		require.NotNil(t, ref, tc.addresses)
		assert.Equal(t, ReasonOverlappingRanges, ref.reason)
		assert.Contains(t, ref.message, tc.want)
	}
}

// TestControlledElsewhereLooksPastTheCache: an advertisement created by
// someone else a moment before the class is still found taken while the
// cache has not seen it, so the pool is not created before the refusal.
func TestControlledElsewhereLooksPastTheCache(t *testing.T) {
	ctx := context.Background()
	squatter := squat(t, "iad-lagging", "lagging-owner")
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), squatter) })

	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "lagging", UID: "lagging-uid"}}
	p, err := classparams.ParseParameters(params(`{"addresses": ["203.0.113.48/28"]}`))
	require.NoError(t, err)
	pool, adv := Render(class, p, mlbNS)
	r := &Reconciler{Deps: bootstrap.Deps{Client: cacheBehind{c.Client}, APIReader: c.Client, MetalLBNamespace: mlbNS}}

	msg, err := r.controlledElsewhere(ctx, pool)
	require.NoError(t, err)
	assert.Empty(t, msg, "the pool's name is free")
	msg, err = r.controlledElsewhere(ctx, adv)
	require.NoError(t, err)
	assert.Equal(t, "cannot render L2Advertisement metallb-system/iad-lagging: it is controlled by ConfigMap lagging-owner already", msg)
}

// TestTooLongName refuses a class whose name cannot make a pool name.
func TestTooLongName(t *testing.T) {
	name := "too-long-" + strings.Repeat("x", 51) // 60 characters
	require.Len(t, name, 60)
	ourClass(t, name, `{"addresses": ["203.0.113.0/28"]}`)
	waitEvent(t, name, corev1.EventTypeWarning, ReasonInvalidClassName,
		`the class name "`+name+`" is 60 characters long; this driver serves class names of at most 59 characters, so that the pool name "iad-`+name+`" stays within 63`)
	assert.True(t, apierrors.IsNotFound(c.Client.Get(context.Background(), key(name), &metallbv1beta1.IPAddressPool{})))
	waitSeries(t, refusedClasses, name, map[string]float64{"reason=InvalidClassName ": 1})
}

// TestOverlap: of two overlapping classes, the later one is refused and
// keeps its previous rendering; once the older class is gone, the refused
// classes are rendered without any change of their own.
func TestOverlap(t *testing.T) {
	ctx := context.Background()
	// Names sort in creation order, so the same-second tie-break agrees.
	old := ourClass(t, "overlap-a-old", `{"addresses": ["198.51.100.192/27"]}`)
	waitPool(t, old.Name, "198.51.100.192/27")

	later := ourClass(t, "overlap-b-later", `{"addresses": ["198.51.100.224/28"]}`)
	laterPool := waitPool(t, later.Name, "198.51.100.224/28")
	setParams(t, later.Name, `{"addresses": ["198.51.100.224/28", "198.51.100.200-198.51.100.210"]}`)
	waitEvent(t, later.Name, corev1.EventTypeWarning, ReasonOverlappingRanges,
		`addresses 198.51.100.200-198.51.100.210 overlap 198.51.100.192/27 of the older class "overlap-a-old"; refusing to render overlapping ranges`)
	got := &metallbv1beta1.IPAddressPool{}
	require.NoError(t, c.Client.Get(ctx, key(later.Name), got))
	assert.Equal(t, laterPool.Spec, got.Spec, "the previous rendering is kept")
	assert.Equal(t, laterPool.Generation, got.Generation)
	waitSeries(t, refusedClasses, later.Name, map[string]float64{"reason=OverlappingRanges ": 1})

	newest := ourClass(t, "overlap-c-newest", `{"addresses": ["198.51.100.192/29"]}`)
	waitEvent(t, newest.Name, corev1.EventTypeWarning, ReasonOverlappingRanges,
		`addresses 198.51.100.192/29 overlap 198.51.100.192/27 of the older class "overlap-a-old"; refusing to render overlapping ranges`)
	assert.True(t, apierrors.IsNotFound(c.Client.Get(ctx, key(newest.Name), &metallbv1beta1.IPAddressPool{})))

	// The older class wins even against a pool rendered before it grew: a
	// pool of another class blocks it instead of making MetalLB refuse
	// two overlapping pools.
	setParams(t, old.Name, `{"addresses": ["198.51.100.192/26"]}`)
	waitEvent(t, old.Name, corev1.EventTypeWarning, ReasonOverlappingRanges,
		`addresses 198.51.100.192/26 overlap 198.51.100.224/28 of IPAddressPool iad-overlap-b-later (rendered for class "overlap-b-later"); refusing to render overlapping ranges`)
	require.NoError(t, c.Client.Get(ctx, key(old.Name), got))
	assert.Equal(t, []string{"198.51.100.192/27"}, got.Spec.Addresses)

	// The older class goes away: both refused classes are rendered.
	require.NoError(t, c.Client.Delete(ctx, old))
	waitPoolWithin(t, later.Name, gcTimeout, "198.51.100.224/28", "198.51.100.200-198.51.100.210")
	waitPoolWithin(t, newest.Name, gcTimeout, "198.51.100.192/29")
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.Equal(t, map[string]float64{"": 1}, series(renderedClasses, of(later.Name)))
		assert.Empty(t, series(refusedClasses, of(later.Name)))
	}, fixture.Timeout, fixture.Tick)
}

func waitPoolWithin(t *testing.T, class string, within time.Duration, addresses ...string) *metallbv1beta1.IPAddressPool {
	t.Helper()
	pool := &metallbv1beta1.IPAddressPool{}
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		require.NoError(t, c.Client.Get(context.Background(), key(class), pool))
		assert.Equal(t, addresses, pool.Spec.Addresses)
	}, within, fixture.Tick, "pool %s holds %v", names.PoolName(class), addresses)
	return pool
}
