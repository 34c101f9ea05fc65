//go:build integration

package service

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/parking"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// fullPassesDuring waits until MetalLB is quiet, runs step, waits until it
// is quiet again and returns the full passes MetalLB started meanwhile. The
// suite runs MetalLB at log level info, where it logs every pass.
func fullPassesDuring(t *testing.T, step func()) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fixture.MetalLBTimeout)
	defer cancel()
	require.NoError(t, c.WaitMetalLBQuiet(ctx, 2*time.Second))
	before, err := c.MetalLBFullPasses()
	require.NoError(t, err)
	step()
	require.NoError(t, c.WaitMetalLBQuiet(ctx, 2*time.Second))
	after, err := c.MetalLBFullPasses()
	require.NoError(t, err)
	return after - before
}

// TestParkedHandoff: with the parking pool installed, attaching a claim to
// a Service moves the hold placeholder to the parking pool instead of
// deleting it, whether the Service could share the address or not, and
// MetalLB makes no pass over every Service for it; detaching pins the same
// placeholder back to the address. The Services start with an address of
// an auto-assigned pool, as on most clusters, and get one back on detach,
// so the detach costs no pass either (a Service left with no address at
// all would cost one: MetalLB's rule, not the driver's).
func TestParkedHandoff(t *testing.T) {
	ctx := context.Background()
	startDriver(t)
	ns := suite.Namespace(t, "parked")
	// The auto-assigned pool serves this test's namespace only: the
	// suite's other tests leave Services waiting for an address.
	plain := fixture.Pool("parked-plain", "192.0.2.176/29")
	plain.Spec.AutoAssign = ptr.To(true)
	plain.Spec.AllocateTo = &metallbv1beta1.ServiceAllocation{Namespaces: []string{ns}}
	suite.CreateForTest(t, cluster.ParkingPool(placeholderNS), plain)

	// The pool as the class controller renders it: for granted Services only.
	pool := fixture.Pool("parked", "192.0.2.160/29")
	marks.WithGrant(pool, "parked")
	suite.CreateForTest(t, cluster.Class("parked", iadv1alpha1.ReclaimDelete, ""), pool)
	for _, tc := range []struct {
		name string
		svc  func(ns, name, claim string, fams ...corev1.IPFamily) *corev1.Service
	}{
		{"shareable", sharedLB},
		{"port 9", lb},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claimName := "ip-" + tc.name[:4]
			addr := provisioned(t, ns, claimName, "parked", iadv1alpha1.FamilyIPv4)[0]
			ip := addr.Spec.Address
			phs := suite.PlaceholdersOf(t, addr.Name)
			require.Len(t, phs, 1)
			hold := phs[0]
			svcName := "web-" + tc.name[:4]
			svc := tc.svc(ns, svcName, "")
			suite.Create(t, svc)
			own := suite.WaitAssigned(t, svc)

			passes := fullPassesDuring(t, func() {
				patchAnnotations(t, ns, svcName, map[string]string{iadv1alpha1.ServiceClaimAnnotation: claimName})
				assertAssociated(t, ns, svcName, claimName, ip, addr)
			})
			assert.Zero(t, passes, "an attach costs MetalLB no full pass")
			assert.Contains(t, suite.WaitEvent(t, fixture.About{Kind: "Service", Namespace: ns, Name: svcName}, ReasonAssociated).Message, "parked handoff")
			assert.EventuallyWithT(t, func(t *assert.CollectT) {
				ph := &corev1.Service{}
				require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(&hold), ph))
				assert.Equal(t, hold.UID, ph.UID, "the same placeholder, parked")
				assert.Equal(t, parking.DefaultPool, ph.Annotations[marks.KeyPool])
				assert.NotContains(t, ph.Annotations, marks.KeyPin)
				if in := fixture.Ingress(ph); assert.Len(t, in, 1) {
					assert.True(t, netip.MustParsePrefix(cluster.ParkingAddresses[0]).Contains(netip.MustParseAddr(in[0])), "a parking address: %s", in[0])
				}
				held := meta.FindStatusCondition(suite.GetAddress(t, addr.Name).Status.Conditions, conditions.Held)
				if assert.NotNil(t, held) {
					assert.Equal(t, metav1.ConditionFalse, held.Status)
					assert.Equal(t, conditions.ReasonReleasedForWorkload, held.Reason)
					assert.Contains(t, held.Message, parking.DefaultPool, "the Held message names the parking pool")
				}
			}, fixture.MetalLBTimeout, fixture.Tick)

			passes = fullPassesDuring(t, func() {
				patchAnnotations(t, ns, svcName, map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
				assertHeld(t, addr.Name, ip)
				suite.WaitAssigned(t, svc)
			})
			assert.Zero(t, passes, "a detach to an address of the auto-assigned pool costs MetalLB no full pass")
			assert.NotEqual(t, ip, own, "the Service had an address of its own")
			back := &corev1.Service{}
			require.NoError(t, c.Client.Get(ctx, types.NamespacedName{Namespace: hold.Namespace, Name: hold.Name}, back))
			assert.Equal(t, hold.UID, back.UID, "the parked placeholder came back")
			assert.Equal(t, ip, back.Annotations[marks.KeyPin])
			assert.Equal(t, names.PoolName("parked"), back.Annotations[marks.KeyPool])
			assert.Equal(t, []string{ip}, fixture.Ingress(back))
		})
	}
}
