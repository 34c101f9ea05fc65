//go:build integration

package service

import (
	"context"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim"
	"github.com/cozystack/metallb-iad/controllers/ipaddress"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// What the tests that need real placeholders share: the reference core,
// the claim controller and the IPAddress controller beside the suite's
// service controller, claims they provision, and the waits and the watch
// on the holds. The stories of the whole system live in test/e2e.

// startDriver runs, for the rest of the test, the reference core, the claim
// controller and the IPAddress controller (the latter two as their own
// ServiceAccounts), beside the suite's service controller; heldPartner
// stays out of the way.
func startDriver(t testing.TB) {
	t.Helper()
	pausePartner(t)
	suite.StartCore(t)
	suite.StartController(t, claim.Controller)
	suite.StartController(t, ipaddress.Controller)
}

// watchHeld starts a fixture.HoldWatch on the suite's placeholder namespace.
func watchHeld(t *testing.T, ips map[string]string, workloads ...client.ObjectKey) *fixture.HoldWatch {
	t.Helper()
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Client.Scheme()})
	require.NoError(t, err)
	return fixture.WatchHeld(t, wc, placeholderNS, ips, workloads...)
}

// provisioned creates a claim and waits until the driver and the core have
// bound it and a placeholder holds each of its addresses. It returns the
// addresses, sorted by name.
func provisioned(t *testing.T, ns, name, class string, family iadv1alpha1.IPFamily) []*iadv1alpha1.IPAddress {
	t.Helper()
	cl := createClaim(t, ns, name, class, family)
	var addrs []*iadv1alpha1.IPAddress
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		addrs = nil
		got := &iadv1alpha1.IPAddressClaim{}
		require.NoError(t, c.Client.Get(context.Background(), client.ObjectKeyFromObject(cl), got))
		require.Equal(t, iadv1alpha1.ClaimBound, got.Status.Phase)
		require.Len(t, got.Status.Addresses, len(family.Families()))
		for _, ca := range got.Status.Addresses {
			addrs = append(addrs, suite.GetAddress(t, ca.Name))
		}
	}, fixture.MetalLBTimeout, fixture.Tick, "claim %s/%s is bound", ns, name)
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].Name < addrs[j].Name })
	for _, a := range addrs {
		assertHeld(t, a.Name, a.Spec.Address)
	}
	return addrs
}

// assertHeld waits until the address is unattached, reports Held True, and
// a placeholder in the placeholder namespace holds exactly its IP.
func assertHeld(t *testing.T, address, ip string) {
	t.Helper()
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		a := suite.GetAddress(t, address)
		assert.Nil(t, a.Status.AssociatedTo)
		assert.True(t, conditions.IsTrue(a.Status.Conditions, conditions.Held), "Held")
		held := false
		for _, ph := range suite.PlaceholdersOf(t, address) {
			held = held || (len(fixture.Ingress(&ph)) == 1 && fixture.Ingress(&ph)[0] == ip)
		}
		assert.True(t, held, "a placeholder holds %s", ip)
	}, fixture.MetalLBTimeout, fixture.Tick)
}
