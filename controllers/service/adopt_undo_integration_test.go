//go:build integration

package service

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// TestUndoImport follows the README's undo of an import, with the class
// controller rendering the class's pool (which admits only granted
// Services): removing the claim annotation detaches an imported Service
// like any attached one (the address stays Bound to the generated claim,
// held by a placeholder, and is not imported again), an owner's pin stays
// on the Service, and once the claim and the address are given up and the
// address is out of the class's ranges, a plain pool gives it back to the
// Service pinned to it.
func TestUndoImport(t *testing.T) {
	ctx := context.Background()
	startDriver(t)
	startClassController(t)
	const ns, cls = "undo", "undo-gold"

	legacy := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: "undo-legacy"},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"203.0.113.129-203.0.113.142"}},
	}
	require.NoError(t, c.Client.Create(ctx, legacy))
	// Both plain pools assign automatically: left behind, they would give
	// the next test's unpinned Services an address.
	t.Cleanup(func() {
		for _, name := range []string{"undo-legacy", "undo-plain"} {
			_ = client.IgnoreNotFound(c.Client.Delete(context.Background(), &metallbv1beta1.IPAddressPool{
				ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: name}}))
		}
	})
	hand := lb(ns, "hand", "")
	hand.Annotations[marks.KeyPin] = "203.0.113.130"
	suite.Create(t, hand)
	suite.Create(t, sharedLB(ns, "auto", ""))
	var autoIP string
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		require.Equal(t, []string{"203.0.113.130"}, fixture.Ingress(suite.GetService(t, ns, "hand")))
		require.Len(t, fixture.Ingress(suite.GetService(t, ns, "auto")), 1)
		autoIP = fixture.Ingress(suite.GetService(t, ns, "auto"))[0]
	}, fixture.MetalLBTimeout, fixture.Tick, "MetalLB assigned the plain Services")

	suite.Create(t, cluster.Class(cls, iadv1alpha1.ReclaimRetain, `{"addresses": ["203.0.113.128/28"], "adoptExisting": true}`))
	handClaim := names.ImportedClaimName("hand", suite.GetService(t, ns, "hand").UID)
	autoClaim := names.ImportedClaimName("auto", suite.GetService(t, ns, "auto").UID)
	assertImported(t, ns, "hand", handClaim, "203.0.113.130", iadv1alpha1.ReclaimRetain)
	assertImported(t, ns, "auto", autoClaim, autoIP, iadv1alpha1.ReclaimRetain)
	require.NoError(t, c.Client.Delete(ctx, legacy))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		for _, n := range []string{"hand", "auto"} {
			assert.Equal(t, names.PoolName(cls), suite.GetService(t, ns, n).Annotations["metallb.io/ip-allocated-from-pool"], n)
		}
	}, fixture.MetalLBTimeout, fixture.Tick, "MetalLB serves the imported addresses from the class's pool")

	// Detach: the address stays reserved for the generated claim.
	handAddr, autoAddr := "ip-203-0-113-130", "ip-"+dashed(autoIP)
	for _, n := range []string{"hand", "auto"} {
		patchAnnotations(t, ns, n, map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
	}
	assertHeld(t, handAddr, "203.0.113.130")
	assertHeld(t, autoAddr, autoIP)
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		for _, n := range []string{"hand", "auto"} {
			s := suite.GetService(t, ns, n)
			assert.Empty(t, fixture.Ingress(s), "%s no longer holds its address", n)
			assert.NotContains(t, s.Labels, marks.LabelGrant, n)
			assert.NotContains(t, s.Annotations, marks.KeyPinnedBy, n)
		}
		for _, a := range []string{handAddr, autoAddr} {
			assert.Equal(t, iadv1alpha1.AddressBound, suite.GetAddress(t, a).Status.Phase, a)
		}
	}, fixture.MetalLBTimeout, fixture.Tick, "detached, addresses Bound to their generated claims")
	assert.Equal(t, "203.0.113.130", suite.GetService(t, ns, "hand").Annotations[marks.KeyPin], "the owner's pin stays")
	assert.NotContains(t, suite.GetService(t, ns, "auto").Annotations, marks.KeyPin, "the driver's pin is withdrawn")
	assert.Never(t, func() bool {
		for _, n := range []string{"hand", "auto"} {
			s := suite.GetService(t, ns, n)
			if len(fixture.Ingress(s)) > 0 || s.Annotations[iadv1alpha1.ServiceClaimAnnotation] != "" {
				return true
			}
		}
		return false
	}, 2*time.Second, fixture.Tick, "not imported again")

	// Give the addresses up (Retain: Released, then deleted), take them out
	// of the class and hand them to a plain pool.
	for _, cl := range []string{handClaim, autoClaim} {
		require.NoError(t, c.Client.Delete(ctx, &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cl}}))
	}
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		for _, a := range []string{handAddr, autoAddr} {
			assert.Equal(t, iadv1alpha1.AddressReleased, suite.GetAddress(t, a).Status.Phase, a)
		}
	}, fixture.Timeout, fixture.Tick, "Released under Retain")
	for _, a := range []string{handAddr, autoAddr} {
		require.NoError(t, c.Client.Delete(ctx, &iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: a}}))
	}
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		for _, a := range []string{handAddr, autoAddr} {
			err := c.Client.Get(ctx, client.ObjectKey{Name: a}, &iadv1alpha1.IPAddress{})
			assert.True(t, apierrors.IsNotFound(err), "%s deleted: %v", a, err)
		}
	}, fixture.Timeout, fixture.Tick)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		class := &iadv1alpha1.IPAddressClass{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: cls}, class); err != nil {
			return err
		}
		class.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"addresses": ["203.0.113.136/29"], "adoptExisting": true}`)}
		return c.Client.Update(ctx, class)
	}))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.Equal(t, []string{"203.0.113.136/29"}, getPool(t, cls).Spec.Addresses)
	}, fixture.Timeout, fixture.Tick, "the class's pool no longer has the addresses")
	require.NoError(t, c.Client.Create(ctx, &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: "undo-plain"},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"203.0.113.129-203.0.113.135"}},
	}))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.Equal(t, []string{"203.0.113.130"}, fixture.Ingress(suite.GetService(t, ns, "hand")))
	}, fixture.MetalLBTimeout, fixture.Tick, "the Service pinned by its owner gets its address from the plain pool")
}
