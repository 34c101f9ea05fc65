//go:build integration

package claim

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// drawOverlaps reads metallb_iad_claim_draws_in_flight for class: how many
// draws were decided, and how many of them while another draw of the class
// was in flight.
func drawOverlaps(t require.TestingT, class string) (draws, overlapped uint64) {
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "metallb_iad_claim_draws_in_flight" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "class") != class {
				continue
			}
			h := m.GetHistogram()
			alone := uint64(0)
			for _, b := range h.GetBucket() {
				if b.GetUpperBound() == 1 {
					alone = b.GetCumulativeCount()
				}
			}
			return h.GetSampleCount(), h.GetSampleCount() - alone
		}
	}
	return 0, 0
}

// TestDrawsOfOneClassOverlap: 24 claims created at once on a class with
// room for 16. Their draws overlap (some are decided while another draw of
// the class is in flight), yet exactly 16 claims are recorded, the other 8
// wait with PoolExhausted and no placeholder (MetalLB asked for nothing on
// their behalf), and every address MetalLB assigned from the range is one
// the ledger records for one of the claims.
func TestDrawsOfOneClassOverlap(t *testing.T) {
	ns := namespace(t)
	const cidr = "10.10.36.0/28"
	cl := rangedClass(t, cidr)

	const n, room = 24, 16
	claims := make([]*iadv1alpha1.IPAddressClaim, n)
	for i := range claims {
		claims[i] = &iadv1alpha1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("burst-%02d", i),
				Annotations: map[string]string{iadv1alpha1.ProvisionerAnnotation: names.Provisioner}},
			Spec: iadv1alpha1.IPAddressClaimSpec{ClassName: cl.Name, Family: iadv1alpha1.FamilyIPv4},
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, c := range claims {
		wg.Go(func() { errs[i] = k.Create(ctx, c) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	var waiting []*iadv1alpha1.IPAddressClaim
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		waiting = nil
		recordedClaims := 0
		for _, c := range claims {
			switch addrs := addressesOf(ct, c); len(addrs) {
			case 0:
				waiting = append(waiting, c)
			case 1:
				var list corev1.ServiceList
				require.NoError(ct, k.List(ctx, &list, client.InNamespace(phNS), client.MatchingLabels{marks.LabelAddress: addrs[0].Name}))
				if len(list.Items) == 1 && list.Items[0].Labels[marks.LabelPlaceholder] == names.PlaceholderHold {
					recordedClaims++
				}
			default:
				require.Fail(ct, "more than one address", "%s has %d", c.Name, len(addrs))
			}
		}
		require.Equal(ct, room, recordedClaims, "claims recorded and handed over")
		require.Len(ct, waiting, n-room)
		for _, c := range waiting {
			require.NotEmpty(ct, suite.Events(ct, fixture.Of(c), ReasonPoolExhausted), "%s is told the class is full", c.Name)
		}
	}, 2*fixture.MetalLBTimeout, fixture.Tick)

	for _, c := range waiting {
		err := k.Get(ctx, placeholderKey(c, iadv1alpha1.FamilyIPv4), &corev1.Service{})
		assert.True(t, apierrors.IsNotFound(err), "%s: no allocation placeholder beyond the class's room: %v", c.Name, err)
		assert.Contains(t, suite.Events(t, fixture.Of(c), ReasonPoolExhausted)[0].Message, "asks MetalLB for nothing")
	}

	// MetalLB's books: every address of the range it assigned is recorded,
	// for one of the claims.
	var all corev1.ServiceList
	require.NoError(t, k.List(ctx, &all))
	var addrs iadv1alpha1.IPAddressList
	require.NoError(t, k.List(ctx, &addrs))
	ledger := map[string]bool{}
	for _, a := range addrs.Items {
		if a.Spec.ClassName == cl.Name {
			require.NotNil(t, a.Spec.ClaimRef, a.Name)
			assert.Equal(t, ns, a.Spec.ClaimRef.Namespace, a.Name)
			ledger[a.Spec.Address] = true
		}
	}
	assert.Len(t, ledger, room)
	prefix := netip.MustParsePrefix(cidr)
	assigned := 0
	for _, svc := range all.Items {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if ip, err := netip.ParseAddr(in.IP); err == nil && prefix.Contains(ip) {
				assigned++
				assert.True(t, ledger[ip.String()], "MetalLB assigned %s to %s/%s, which the ledger does not record", ip, svc.Namespace, svc.Name)
			}
		}
	}
	assert.Equal(t, room, assigned, "MetalLB assigned as many addresses of the range as the ledger records")

	draws, overlapped := drawOverlaps(t, cl.Name)
	t.Logf("%d draws decided, %d of them while another draw of the class was in flight", draws, overlapped)
	assert.GreaterOrEqual(t, draws, uint64(room), "every recorded claim drew")
	assert.Positive(t, overlapped, "draws of one class overlap")
}
