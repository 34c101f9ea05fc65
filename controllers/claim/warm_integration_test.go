//go:build integration

package claim

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/controllers/claim/warm"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// warmClass creates a class of this driver with warm reservations over
// cidr, and its MetalLB pool; when the test ends, they go with what the
// class left.
func warmClass(t *testing.T, cidr string, warm int) *iadv1alpha1.IPAddressClass {
	t.Helper()
	c := cluster.Class("warm-"+rand.String(6), iadv1alpha1.ReclaimDelete, fmt.Sprintf(`{"addresses":[%q],"warmAddresses":%d}`, cidr, warm))
	suite.Create(t, c)
	suite.CreateForTest(t, fixture.Pool(c.Name, cidr))
	t.Cleanup(func() {
		_ = k.Delete(ctx, c)
		cleanupClass(c.Name)
	})
	return c
}

// cleanupClass deletes the addresses of a class (as deleteAddress does)
// and its placeholders.
func cleanupClass(class string) {
	var l iadv1alpha1.IPAddressList
	_ = k.List(ctx, &l)
	for i := range l.Items {
		if l.Items[i].Spec.ClassName == class {
			deleteAddress(&l.Items[i])
		}
	}
	var phs corev1.ServiceList
	_ = k.List(ctx, &phs, client.InNamespace(phNS))
	for i := range phs.Items {
		if phs.Items[i].Annotations[marks.KeyClass] == class {
			_ = k.Delete(ctx, &phs.Items[i])
		}
	}
}

// boundEntry creates an IPAddress of class for ip, bound to the claim
// ns/claim, as the ledger would record it, and deletes it after the test.
func boundEntry(t *testing.T, class, ip, ns, claim string) *iadv1alpha1.IPAddress {
	t.Helper()
	a := fixture.IPAddress(t, class, ip, &iadv1alpha1.ClaimReference{Namespace: ns, Name: claim})
	suite.Create(t, a)
	t.Cleanup(func() { deleteAddress(a) })
	return a
}

// warmOf is the class's warm addresses: no claimRef, Available, not being
// deleted.
func warmOf(t require.TestingT, class string) []iadv1alpha1.IPAddress {
	var out []iadv1alpha1.IPAddress
	for _, a := range suite.AddressesOfClass(t, class) {
		if a.Spec.ClaimRef == nil && a.DeletionTimestamp == nil && a.Status.Phase == iadv1alpha1.AddressAvailable {
			out = append(out, a)
		}
	}
	return out
}

// TestWarmReservations runs the reference core beside the controller: a
// class asking for warm addresses gets them as Available IPAddresses held
// by placeholders; claims bind to them without an allocation placeholder of
// their own; the driver refills; lowering the target drops the surplus and
// never a bound address.
func TestWarmReservations(t *testing.T) {
	suite.StartCore(t)

	ns := namespace(t)
	cl := warmClass(t, "10.10.30.0/28", 3)

	// Three warm addresses, each recorded like a claim's, bound to nobody.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.Len(ct, warmOf(ct, cl.Name), 3)
	}, fixture.Timeout, fixture.Tick, "the class never gets its three warm addresses")
	for _, a := range warmOf(t, cl.Name) {
		assert.Equal(t, "true", a.Labels[marks.LabelWarm])
		assert.NotNil(t, a.Spec.Source.FromClass)
		assert.Contains(t, a.Finalizers, marks.Finalizer)
		assert.Equal(t, iadv1alpha1.ReclaimDelete, a.Spec.ReclaimPolicy)
		var phs corev1.ServiceList
		require.NoError(t, k.List(ctx, &phs, client.InNamespace(phNS), client.MatchingLabels{marks.LabelAddress: a.Name}))
		require.Len(t, phs.Items, 1, "one placeholder holds warm address %s", a.Name)
		ph := phs.Items[0]
		assert.Equal(t, names.PlaceholderHold, ph.Labels[marks.LabelPlaceholder])
		assert.Equal(t, a.Spec.Address, ph.Annotations[marks.KeyPin])
		assert.True(t, placeholder.OwnedByAddress(&ph, a.Name))
		if assert.Len(t, ph.Status.LoadBalancer.Ingress, 1, "placeholder %s holds exactly the warm address", ph.Name) {
			assert.Equal(t, a.Spec.Address, ph.Status.LoadBalancer.Ingress[0].IP)
		}
	}
	warmNames := map[string]bool{}
	for _, a := range warmOf(t, cl.Name) {
		warmNames[a.Name] = true
	}

	// Two claims bind to warm addresses; neither gets a placeholder of its own.
	c1 := claim(t, ns, cl.Name, iadv1alpha1.FamilyIPv4, "")
	c2 := claim(t, ns, cl.Name, iadv1alpha1.FamilyIPv4, "")
	for _, c := range []*iadv1alpha1.IPAddressClaim{c1, c2} {
		cur := &iadv1alpha1.IPAddressClaim{}
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			require.NoError(ct, k.Get(ctx, client.ObjectKeyFromObject(c), cur))
			require.Equal(ct, iadv1alpha1.ClaimBound, cur.Status.Phase)
		}, fixture.Timeout, fixture.Tick, "claim %s is never Bound", c.Name)
		require.Len(t, cur.Status.Addresses, 1)
		assert.True(t, warmNames[cur.Status.Addresses[0].Name], "claim %s is bound to a warm address, got %s", c.Name, cur.Status.Addresses[0].Name)
		err := k.Get(ctx, placeholderKey(c, iadv1alpha1.FamilyIPv4), &corev1.Service{})
		assert.True(t, apierrors.IsNotFound(err), "no allocation placeholder for a claim a warm address served: %v", err)
	}

	// The driver refills: three warm again, five addresses in all.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.Len(ct, warmOf(ct, cl.Name), 3)
		require.Len(ct, suite.AddressesOfClass(ct, cl.Name), 5)
	}, fixture.Timeout, fixture.Tick, "the warm addresses are never refilled")

	// Lowering the target deletes surplus warm addresses, never a bound one.
	orig := cl.DeepCopy()
	cl.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"addresses":["10.10.30.0/28"],"warmAddresses":1}`)}
	require.NoError(t, k.Patch(ctx, cl, client.MergeFrom(orig)))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.Len(ct, warmOf(ct, cl.Name), 1)
	}, fixture.Timeout, fixture.Tick, "the surplus is never dropped")
	for _, c := range []*iadv1alpha1.IPAddressClaim{c1, c2} {
		addrs := addressesOf(t, c)
		require.Len(t, addrs, 1)
		assert.Nil(t, addrs[0].DeletionTimestamp, "a bound address is never dropped")
	}
	// Dropped ones carry a deletion timestamp until the IPAddress
	// controller (not running here) tears them down.
	var deleting []string
	for _, a := range suite.AddressesOfClass(t, cl.Name) {
		if a.DeletionTimestamp != nil {
			deleting = append(deleting, a.Name)
		}
	}
	slices.Sort(deleting)
	assert.Len(t, deleting, 2, "two surplus warm addresses are deleted")
}

// TestWarmReservationsRespectTheRanges: a class whose ranges have room
// for fewer warm addresses than it asks for gets what fits and a Warning,
// and the driver leaves no placeholder waiting for an address MetalLB
// cannot give.
func TestWarmReservationsRespectTheRanges(t *testing.T) {
	ns := namespace(t)
	cl := warmClass(t, "10.10.31.0/30", 0)
	// One of the four addresses is already in the ledger and in use.
	plainPinned(t, ns, names.PoolName(cl.Name), "10.10.31.3")
	static := boundEntry(t, cl.Name, "10.10.31.3", ns, "someone")
	// The plain Service holds it, not a placeholder or a Service attached
	// through its claim: the IPAddress controller (not running here) puts
	// it in Conflict. Unsettled, the driver would ask MetalLB for nothing.
	static.Status.Phase = iadv1alpha1.AddressConflict
	require.NoError(t, k.Status().Update(ctx, static))
	orig := cl.DeepCopy()
	cl.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"addresses":["10.10.31.0/30"],"warmAddresses":4}`)}
	require.NoError(t, k.Patch(ctx, cl, client.MergeFrom(orig)))

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		n := 0
		for _, a := range suite.AddressesOfClass(ct, cl.Name) {
			if a.Spec.ClaimRef == nil {
				n++
			}
		}
		require.Equal(ct, 3, n)
	}, fixture.Timeout, fixture.Tick, "the class never gets the three warm addresses that fit")
	suite.WaitEvent(t, fixture.Of(cl), warm.ReasonWarmPoolFull)
	// Every warm placeholder of the class is handed over (a fourth would
	// wait for MetalLB forever).
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var phs corev1.ServiceList
		require.NoError(ct, k.List(ctx, &phs, client.InNamespace(phNS), client.MatchingLabels{marks.LabelPlaceholder: names.PlaceholderWarm}))
		for _, ph := range phs.Items {
			require.NotEqual(ct, cl.Name, ph.Annotations[marks.KeyClass], "warm placeholder %s of the full class still waits", ph.Name)
		}
	}, fixture.Timeout, fixture.Tick, "a warm placeholder of the full class waits for MetalLB")
}

// plainPinned creates a Service that MetalLB gives ip from pool.
func plainPinned(t *testing.T, ns, pool, ip string) {
	t.Helper()
	svc := fixture.LoadBalancer(ns, "taken", map[string]string{marks.KeyPool: pool, marks.KeyPin: ip})
	suite.CreateForTest(t, svc)
	suite.WaitIngress(t, svc, ip)
}

// TestWarmGiveBackPauses: MetalLB hands a warm placeholder an address the
// ledger records for a Service attached to it in a gap handoff that has
// not got it yet. The warm controller gives it back and pauses before it
// draws again (2 s, doubling while the same address comes back): warm
// placeholders are named anew each time, and without the pause the next
// one would get the same address at once, in a loop of Service creations
// and deletions, each deletion a full pass in MetalLB.
func TestWarmGiveBackPauses(t *testing.T) {
	ns := namespace(t)
	cl := warmClass(t, "10.10.33.0/30", 0)
	// The first address of the range, which MetalLB hands out first, is
	// attached to a Service that does not hold it yet.
	taken := boundEntry(t, cl.Name, "10.10.33.0", ns, "web-ip")
	taken.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: ns, Name: "web"}
	require.NoError(t, k.Status().Update(ctx, taken))
	orig := cl.DeepCopy()
	cl.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"addresses":["10.10.33.0/30"],"warmAddresses":1}`)}
	require.NoError(t, k.Patch(ctx, cl, client.MergeFrom(orig)))

	// The give-backs, from the class's Events: the same message each time,
	// so one Event counted again at each repeat, whose first and last times
	// span the pauses between them.
	returned := func(t require.TestingT) (n int, span time.Duration) {
		var first, last time.Time
		for _, e := range suite.Events(t, fixture.About{Kind: "IPAddressClass", Name: cl.Name}, warm.ReasonWarmReturned) {
			n += max(int(e.Count), 1)
			if first.IsZero() || e.FirstTimestamp.Time.Before(first) {
				first = e.FirstTimestamp.Time
			}
			if last.Before(e.LastTimestamp.Time) {
				last = e.LastTimestamp.Time
			}
		}
		return n, last.Sub(first)
	}
	// Given back at 0 s, then after pauses of 2 s and 4 s: a third time
	// shows the controller draws again after each pause. However late the
	// test looks, n give-backs take at least the n-1 pauses before them
	// (less a second: Event times are whole seconds); sooner means a pause
	// was cut short.
	var n int
	var span time.Duration
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		n, span = returned(ct)
		assert.GreaterOrEqual(ct, n, 3)
	}, fixture.Timeout, fixture.Tick, "MetalLB hands a warm placeholder the attached address, the driver gives it back and draws again after each pause")
	assert.GreaterOrEqual(t, span, pausesBefore(n)-time.Second,
		"the warm controller pauses between draws of an address it gave back: %d give-backs in %s", n, span)
}

// pausesBefore is how long n give-backs of one address in a row take at
// the least: the pauses between them, doubling from GiveBackPause up to
// MaxGiveBackPause.
func pausesBefore(n int) time.Duration {
	var total time.Duration
	for i, d := 1, draw.GiveBackPause; i < n; i, d = i+1, min(2*d, draw.MaxGiveBackPause) {
		total += d
	}
	return total
}
