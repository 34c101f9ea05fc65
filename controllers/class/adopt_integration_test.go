//go:build integration

package class

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/metallb-iad/test/fixture"
)

// TestAdoptOverlapsLivePool: a class overlapping a pool the driver did not
// render is refused, unless it has adoptExisting: then it is rendered, with
// an OverlapsLivePool Warning naming the pool, so that MetalLB can take the
// assignments over once the administrator removes the overlap. An overlap
// with an older class is still refused, adoptExisting or not.
func TestAdoptOverlapsLivePool(t *testing.T) {
	ctx := context.Background()
	live := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: mlbNS, Name: "live-plain"},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"203.0.113.160/28"}},
	}
	require.NoError(t, c.Client.Create(ctx, live))

	off := ourClass(t, "adopt-overlap-off", `{"addresses": ["203.0.113.160/29"]}`)
	on := ourClass(t, "adopt-overlap-on", `{"addresses": ["203.0.113.168/29"], "adoptExisting": true}`)
	other := ourClass(t, "adopt-overlap-other", `{"addresses": ["203.0.113.172/30"], "adoptExisting": true}`)
	// Registered last, run first: the live pool goes before the classes,
	// so MetalLB's configuration is valid again for the next tests.
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), live) })

	waitEvent(t, off.Name, corev1.EventTypeWarning, ReasonOverlappingRanges,
		`addresses 203.0.113.160/29 overlap 203.0.113.160/28 of IPAddressPool live-plain (not rendered by this driver); refusing to render overlapping ranges`)
	assert.True(t, apierrors.IsNotFound(c.Client.Get(ctx, key(off.Name), &metallbv1beta1.IPAddressPool{})), "nothing rendered without adoptExisting")

	waitPool(t, on.Name, "203.0.113.168/29")
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		events := suite.Events(t, fixture.About{Kind: "IPAddressClass", Name: on.Name}, ReasonOverlapsLivePool)
		require.Len(t, events, 1)
		assert.Equal(t, corev1.EventTypeWarning, events[0].Type)
		for _, part := range []string{"203.0.113.168/29", "IPAddressPool live-plain (not rendered by this driver)",
			"rendered " + mlbNS + "/iad-adopt-overlap-on anyway because adoptExisting is on", "remove the class's ranges from live-plain"} {
			assert.Contains(t, events[0].Message, part)
		}
	}, fixture.Timeout, fixture.Tick)

	waitEvent(t, other.Name, corev1.EventTypeWarning, ReasonOverlappingRanges,
		`addresses 203.0.113.172/30 overlap 203.0.113.168/29 of the older class "adopt-overlap-on"; refusing to render overlapping ranges`)
	assert.True(t, apierrors.IsNotFound(c.Client.Get(ctx, key(other.Name), &metallbv1beta1.IPAddressPool{})), "an older class still refuses")
}
