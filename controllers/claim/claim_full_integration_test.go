//go:build integration

package claim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/rand"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// TestFullClassAsksMetalLBForNothing: once the ledger holds every address
// of a class's ranges, a further claim stays Pending with PoolExhausted and
// gets no allocation placeholder (MetalLB would fail it and never retry);
// when an address of the class is freed, the claim proceeds.
func TestFullClassAsksMetalLBForNothing(t *testing.T) {
	ns := namespace(t)
	cl := rangedClass(t, "10.10.32.0/31")

	c1 := claim(t, ns, cl.Name, iadv1alpha1.FamilyIPv4, names.Provisioner)
	c2 := claim(t, ns, cl.Name, iadv1alpha1.FamilyIPv4, names.Provisioner)
	ph1, a1 := recorded(t, c1, iadv1alpha1.FamilyIPv4)
	recorded(t, c2, iadv1alpha1.FamilyIPv4)

	c3 := claim(t, ns, cl.Name, iadv1alpha1.FamilyIPv4, names.Provisioner)
	ev := suite.WaitEvent(t, fixture.Of(c3), ReasonPoolExhausted)
	assert.Contains(t, ev.Message, "asks MetalLB for nothing")
	err := k.Get(ctx, placeholderKey(c3, iadv1alpha1.FamilyIPv4), &corev1.Service{})
	assert.True(t, apierrors.IsNotFound(err), "no allocation placeholder while the class is full: %v", err)

	// Free one address as deleting its claim would: the claim goes, its
	// hold goes, then the IPAddress.
	require.NoError(t, k.Delete(ctx, c1))
	require.NoError(t, k.Delete(ctx, ph1))
	deleteAddress(a1)
	ph3, a3 := recorded(t, c3, iadv1alpha1.FamilyIPv4)
	assert.Equal(t, a1.Spec.Address, a3.Spec.Address, "the freed address serves the waiting claim")
	assert.Equal(t, names.PlaceholderHold, ph3.Labels[marks.LabelPlaceholder])
}

// TestRoomCountsUnrecordedPlaceholders: of six claims created at once on a
// class with room for two, two get a placeholder and the others wait with
// PoolExhausted, MetalLB asked for nothing on their behalf. The later
// claims are looked at while MetalLB has answered the first placeholders
// and their addresses are not recorded yet, so the class's room must count
// those placeholders too.
func TestRoomCountsUnrecordedPlaceholders(t *testing.T) {
	ns := namespace(t)
	cl := rangedClass(t, "10.10.34.0/31")

	cs := make([]*iadv1alpha1.IPAddressClaim, 6)
	for i := range cs {
		cs[i] = claim(t, ns, cl.Name, iadv1alpha1.FamilyIPv4, names.Provisioner)
	}

	var waiting []*iadv1alpha1.IPAddressClaim
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		waiting = nil
		for _, c := range cs {
			if len(addressesOf(ct, c)) == 0 {
				waiting = append(waiting, c)
			}
		}
		require.Len(ct, waiting, len(cs)-2, "two claims are recorded")
		for _, c := range waiting {
			require.NotEmpty(ct, suite.Events(ct, fixture.Of(c), ReasonPoolExhausted), "%s is told the class is full", c.Name)
		}
	}, fixture.Timeout, fixture.Tick)
	for _, c := range waiting {
		err := k.Get(ctx, placeholderKey(c, iadv1alpha1.FamilyIPv4), &corev1.Service{})
		assert.True(t, apierrors.IsNotFound(err), "%s: no allocation placeholder beyond the class's room: %v", c.Name, err)
		assert.Contains(t, suite.Events(t, fixture.Of(c), ReasonPoolExhausted)[0].Message, "asks MetalLB for nothing")
	}
}

// rangedClass creates a class of the driver whose parameters give its
// range, and the class pool MetalLB serves it from.
func rangedClass(t *testing.T, cidr string) *iadv1alpha1.IPAddressClass {
	t.Helper()
	cl := cluster.Class("full-"+rand.String(6), iadv1alpha1.ReclaimDelete, fixture.Addresses(cidr))
	suite.CreateForTest(t, cl, fixture.Pool(cl.Name, cidr))
	return cl
}
