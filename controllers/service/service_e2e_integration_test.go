//go:build integration

package service

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim"
	"github.com/cozystack/metallb-iad/controllers/ipaddress"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

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

// TestEndToEndWithCoreClaimAndIPAddressControllers runs the whole story
// with the reference core, the claim controller and the IPAddress
// controller (the class controller's pool is created by hand): a claim is
// provisioned and held by a placeholder; annotating a Service that cannot
// share the address with the placeholder (the gap handoff) moves the
// address to it; removing the annotation brings the hold back; another
// Service then gets the same address; deleting it brings the hold back.
func TestEndToEndWithCoreClaimAndIPAddressControllers(t *testing.T) {
	ctx := context.Background()
	startDriver(t)

	suite.Create(t, cluster.Class("e2e", iadv1alpha1.ReclaimDelete, ""), fixture.Pool("e2e", "198.51.100.240/30"))
	cl := createClaim(t, "e2e", "web-ip", "e2e", iadv1alpha1.FamilyIPv4)

	// Provisioned, bound and held.
	var addr *iadv1alpha1.IPAddress
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		got := &iadv1alpha1.IPAddressClaim{}
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(cl), got))
		require.Equal(t, iadv1alpha1.ClaimBound, got.Status.Phase)
		require.Len(t, got.Status.Addresses, 1)
		addr = suite.GetAddress(t, got.Status.Addresses[0].Name)
		assert.Equal(t, iadv1alpha1.AddressBound, addr.Status.Phase)
		assert.True(t, conditions.IsTrue(addr.Status.Conditions, conditions.Held), "held by a placeholder")
	}, fixture.MetalLBTimeout, fixture.Tick)
	require.NotNil(t, addr)
	ip := addr.Spec.Address
	assertHeld(t, addr.Name, ip)

	// Attach.
	suite.Create(t, lb("e2e", "web", "web-ip"))
	assertAssociated(t, "e2e", "web", "web-ip", ip, addr)
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		a := suite.GetAddress(t, addr.Name)
		cond := meta.FindStatusCondition(a.Status.Conditions, conditions.Held)
		if assert.NotNil(t, cond) {
			assert.Equal(t, metav1.ConditionFalse, cond.Status)
			assert.Equal(t, conditions.ReasonReleasedForWorkload, cond.Reason)
		}
		assert.Empty(t, suite.PlaceholdersOf(t, addr.Name), "no placeholder while attached")
		assert.Equal(t, iadv1alpha1.AddressBound, a.Status.Phase)
	}, fixture.Timeout, fixture.Tick)

	// Detach by removing the annotation: the hold comes back on the same IP.
	patchAnnotations(t, "e2e", "web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		s := suite.GetService(t, "e2e", "web")
		assert.Empty(t, fixture.Ingress(s))
		assert.NotContains(t, s.Annotations, marks.KeyPin)
		a := suite.GetAddress(t, addr.Name)
		assert.Nil(t, a.Status.AssociatedTo)
		assert.Equal(t, iadv1alpha1.AddressBound, a.Status.Phase)
	}, fixture.MetalLBTimeout, fixture.Tick)
	assertHeld(t, addr.Name, ip)

	// Another Service gets the same address.
	suite.Create(t, lb("e2e", "api", "web-ip"))
	assertAssociated(t, "e2e", "api", "web-ip", ip, addr)

	// Deleting it brings the hold back.
	api := suite.GetService(t, "e2e", "api")
	require.NoError(t, c.Client.Delete(ctx, api))
	suite.WaitGone(t, fixture.Timeout, api)
	assertHeld(t, addr.Name, ip)
	assert.Equal(t, iadv1alpha1.AddressBound, suite.GetAddress(t, addr.Name).Status.Phase)
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
