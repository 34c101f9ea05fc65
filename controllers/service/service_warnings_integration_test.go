//go:build integration

package service

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/ipaddress"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// warnings lists the Warning Events about the namespace's objects and
// about the addresses, as "source reason kind/name: message".
func warnings(t require.TestingT, ns string, addrs []*iadv1alpha1.IPAddress) []string {
	var out []string
	add := func(list []corev1.Event) {
		for _, e := range list {
			if e.Type == corev1.EventTypeWarning {
				src := e.Source.Component
				if src == "" {
					src = e.ReportingController
				}
				out = append(out, fmt.Sprintf("%s %s %s/%s: %s", src, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message))
			}
		}
	}
	var evs corev1.EventList
	require.NoError(t, c.Client.List(context.Background(), &evs, client.InNamespace(ns)))
	add(evs.Items)
	for _, a := range addrs {
		add(suite.Events(t, fixture.About{Kind: "IPAddress", Name: a.Name}, ""))
	}
	sort.Strings(out)
	return out
}

// driverWarnings keeps the Warnings the driver recorded: MetalLB's own
// refusal of a fresh Service it had no address for, before the driver
// pinned it, is MetalLB's to say, and the API server's repairs of its
// cluster IPs on this busy control plane are its own.
func driverWarnings(all []string) []string {
	var out []string
	for _, w := range all {
		if strings.HasPrefix(w, "metallb-iad-") {
			out = append(out, w)
		}
	}
	return out
}

// TestFreshAnnotatedServicesAttachWithoutWarning: claims attached at once
// to fresh Services created with the claim annotation, detached by
// deleting the Services, then attached to new Services, as a user does with
// kubectl: every attach is healthy, so the driver records no Warning
// anywhere, on a cluster without an auto-assigned pool (MetalLB refuses
// each fresh Service "no available IPs" before the driver pins it) and on
// one with one (MetalLB gives each fresh Service an address of its own
// first).
func TestFreshAnnotatedServicesAttachWithoutWarning(t *testing.T) {
	startDriver(t)
	suite.CreateForTest(t, cluster.ParkingPool(placeholderNS))
	for _, tc := range []struct {
		name, class, ns, cidr, auto string
	}{
		{"no auto-assigned pool", "fresh", "fresh", "203.0.113.224/28", ""},
		{"an auto-assigned pool", "fresh-auto", "fresh-auto", "192.0.2.192/28", "192.0.2.224/28"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := suite.Namespace(t, tc.ns)
			if tc.auto != "" {
				plain := fixture.Pool(tc.class+"-plain", tc.auto)
				plain.Spec.AutoAssign = ptr.To(true)
				plain.Spec.AllocateTo = &metallbv1beta1.ServiceAllocation{Namespaces: []string{ns}}
				suite.CreateForTest(t, plain)
			}
			pool := fixture.Pool(tc.class, tc.cidr)
			marks.WithGrant(pool, tc.class)
			suite.CreateForTest(t, cluster.Class(tc.class, iadv1alpha1.ReclaimDelete, ""), pool)

			const n = 8
			var addrs []*iadv1alpha1.IPAddress
			for i := range n {
				addrs = append(addrs, provisioned(t, ns, fmt.Sprintf("ip-%d", i), tc.class, iadv1alpha1.FamilyIPv4)...)
			}
			for round := 1; round <= 2; round++ {
				for i := range n {
					suite.Create(t, sharedLB(ns, fmt.Sprintf("web-%d-%d", round, i), fmt.Sprintf("ip-%d", i)))
				}
				for i, a := range addrs {
					assertAssociated(t, ns, fmt.Sprintf("web-%d-%d", round, i), fmt.Sprintf("ip-%d", i), a.Spec.Address, a)
				}
				for i := range n {
					require.NoError(t, c.Client.Delete(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d-%d", round, i)}}))
				}
				// Each address's hold is pinned back and the Service's
				// deletion recorded on it after the attach's every Event,
				// so any Warning of the attach is on record.
				for _, a := range addrs {
					assertHeld(t, a.Name, a.Spec.Address)
					require.EventuallyWithT(t, func(ct *assert.CollectT) {
						assert.GreaterOrEqual(ct, detaches(ct, a.Name), int32(round))
					}, fixture.MetalLBTimeout, fixture.Tick, "the detach of %s is recorded", a.Name)
				}
			}
			all := warnings(t, ns, addrs)
			t.Logf("Warnings: %d, the driver's: %d", len(all), len(driverWarnings(all)))
			assert.Empty(t, driverWarnings(all), "a healthy attach gets no Warning from the driver")
			for _, a := range addrs {
				assert.Nil(t, meta.FindStatusCondition(suite.GetAddress(t, a.Name).Status.Conditions, conditions.AttachmentServed),
					"%s: no attachment was ever refused", a.Name)
			}
		})
	}
}

// detaches counts the Events recording that the Service an address was
// attached to is gone, repeats included: Detached when the service
// controller clears the association, AssociationCleared when the
// ipaddress controller finds it stale first. The two race on every
// deletion; either is the record.
func detaches(t require.TestingT, address string) int32 {
	var n int32
	for _, reason := range []string{ReasonDetached, ipaddress.ReasonAssociationCleared} {
		for _, e := range suite.Events(t, fixture.About{Kind: "IPAddress", Name: address}, reason) {
			n += max(e.Count, 1)
		}
	}
	return n
}

// TestRefusedAttachmentIsReported: MetalLB refuses the attached Service the
// address for good (the class's pool admits only the placeholder
// namespace): AttachmentServed goes False, quoting MetalLB, with a Warning
// AttachmentRefused on the address and on the Service; it goes True again
// once the Service is detached.
func TestRefusedAttachmentIsReported(t *testing.T) {
	startDriver(t)
	suite.CreateForTest(t, cluster.ParkingPool(placeholderNS))
	ns := suite.Namespace(t, "refused")
	pool := fixture.Pool("refused", "192.0.2.208/29")
	pool.Spec.AllocateTo = &metallbv1beta1.ServiceAllocation{Namespaces: []string{placeholderNS}}
	suite.CreateForTest(t, cluster.Class("refused", iadv1alpha1.ReclaimDelete, ""), pool)
	addr := provisioned(t, ns, "ip", "refused", iadv1alpha1.FamilyIPv4)[0]

	suite.Create(t, sharedLB(ns, "web", "ip"))
	var served *metav1.Condition
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		served = meta.FindStatusCondition(suite.GetAddress(ct, addr.Name).Status.Conditions, conditions.AttachmentServed)
		require.NotNil(ct, served)
		assert.Equal(ct, metav1.ConditionFalse, served.Status)
	}, fixture.MetalLBTimeout, fixture.Tick, "the refusal is reported")
	assert.Equal(t, conditions.ReasonRefusedByMetalLB, served.Reason)
	assert.Contains(t, served.Message, "not compatible", "MetalLB's words")
	assert.Contains(t, served.Message, "Service "+ns+"/web")
	for _, about := range []fixture.About{{Kind: "IPAddress", Name: addr.Name}, {Kind: "Service", Namespace: ns, Name: "web"}} {
		ev := suite.WaitEvent(t, about, ipaddress.ReasonAttachmentRefused)
		assert.Equal(t, corev1.EventTypeWarning, ev.Type)
		assert.Equal(t, served.Message, ev.Message)
	}

	require.NoError(t, c.Client.Delete(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.True(ct, conditions.IsTrue(suite.GetAddress(ct, addr.Name).Status.Conditions, conditions.AttachmentServed))
	}, fixture.MetalLBTimeout, fixture.Tick, "nothing refused once detached")
	assertHeld(t, addr.Name, addr.Spec.Address)
}
