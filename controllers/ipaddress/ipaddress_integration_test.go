//go:build integration

package ipaddress

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/ipaddress/hold"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// testPlaceholderNamespace is the placeholder namespace of the controller
// under test.
const testPlaceholderNamespace = "iad-placeholders"

var (
	suite *fixture.Suite
	adm   client.Client // the admin
)

func TestMain(m *testing.M) {
	opts := fixture.Options{Controller: Controller, PlaceholderNamespace: testPlaceholderNamespace}
	fixture.Main(m, opts, func(s *fixture.Suite) { suite, adm = s, s.Client })
}

// ourClass creates the MetalLB pool iad-<name> (manual only) with the given
// ranges and an IPAddressClass of this driver with no reclaim policy set, as
// the class controller would (classWithPolicy).
func ourClass(t *testing.T, name string, ranges ...string) {
	t.Helper()
	classWithPolicy(t, name, "", ranges...)
}

// newAddress creates an IPAddress the way an administrator does statically
// (or the claim controller does, with claimRef pre-set).
func newAddress(t *testing.T, class, ip string, ref *iadv1alpha1.ClaimReference, finalizers ...string) *iadv1alpha1.IPAddress {
	t.Helper()
	a := fixture.IPAddress(t, class, ip, ref)
	a.Finalizers = finalizers
	suite.Create(t, a)
	return a
}

// requireHeldBy waits until exactly one placeholder holds the address,
// MetalLB assigned it exactly ip, and Held is True; it returns the placeholder.
func requireHeldBy(t *testing.T, address, ip string) *corev1.Service {
	t.Helper()
	var got corev1.Service
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		phs := suite.PlaceholdersOf(ct, address)
		require.Len(ct, phs, 1)
		got = phs[0]
		assert.Equal(ct, []string{ip}, fixture.Ingress(&got))
		assert.Equal(ct, ip, got.Annotations[marks.KeyPin])
		held := meta.FindStatusCondition(suite.GetAddress(ct, address).Status.Conditions, conditions.Held)
		require.NotNil(ct, held)
		assert.Equal(ct, metav1.ConditionTrue, held.Status)
		assert.Equal(ct, conditions.ReasonHeldByPlaceholder, held.Reason)
		assert.Equal(ct, fmt.Sprintf("MetalLB assigned %s to placeholder Service %s/%s", ip, got.Namespace, got.Name), held.Message)
	}, fixture.MetalLBTimeout, fixture.Tick, "address %s held by a placeholder", address)
	return &got
}

func requireHeldCondition(t *testing.T, address string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got = meta.FindStatusCondition(suite.GetAddress(ct, address).Status.Conditions, conditions.Held)
		require.NotNil(ct, got)
		assert.Equal(ct, status, got.Status)
		assert.Equal(ct, reason, got.Reason)
	}, fixture.Timeout, fixture.Tick, "Held=%s/%s on %s", status, reason, address)
	return got
}

// grantSharing takes the attach grant on the address for Service ns/name,
// which asks for the address's claim and can share it, as the Service
// controller does before the shared handoff, and waits until the hold
// placeholder carries the address's sharing key. A Service pinned with the
// key before that is refused by MetalLB, and gets the address in the full
// pass the key's arrival on the hold starts.
func grantSharing(t *testing.T, address, ns, name string) {
	t.Helper()
	a := suite.GetAddress(t, address)
	orig := a.DeepCopy()
	if a.Annotations == nil {
		a.Annotations = map[string]string{}
	}
	a.Annotations[marks.AnnotationAttaching] = ns + "/" + name
	require.NoError(t, adm.Patch(context.Background(), a, client.MergeFrom(orig)))
	key := sharingkey.Keys{}.Of(a)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		phs := suite.PlaceholdersOf(ct, address)
		require.Len(ct, phs, 1)
		assert.Equal(ct, key, phs[0].Annotations[marks.KeySharing])
	}, fixture.Timeout, fixture.Tick, "the hold of %s is given the key for Service %s/%s", address, ns, name)
}

// TestFreshAddressIsHeld: an address of our class (created statically, with
// no finalizer) gets the driver's finalizer and a hold placeholder MetalLB
// assigns exactly that address to, for IPv4 and IPv6; a hold deleted out of
// band is recreated.
func TestFreshAddressIsHeld(t *testing.T) {
	ctx := context.Background()
	ourClass(t, "fresh", "192.0.2.0/28", "2001:db8:2::/124")

	for _, ip := range []string{"192.0.2.3", "2001:db8:2::5"} {
		a := newAddress(t, "fresh", ip, nil)
		ph := requireHeldBy(t, a.Name, ip)

		assert.Equal(t, placeholder.HoldName(a.Name), ph.Name)
		assert.Equal(t, names.PlaceholderHold, ph.Labels[marks.LabelPlaceholder])
		assert.Equal(t, "iad-fresh", ph.Annotations[marks.KeyPool])
		assert.NotContains(t, ph.Annotations, marks.KeySharing, "no workload shares it: no sharing key")
		require.Len(t, ph.OwnerReferences, 1)
		assert.Equal(t, a.UID, ph.OwnerReferences[0].UID)
		assert.Equal(t, "IPAddress", ph.OwnerReferences[0].Kind)
		assert.Equal(t, corev1.ServiceTypeLoadBalancer, ph.Spec.Type)
		assert.Empty(t, ph.Spec.Selector)
		assert.False(t, *ph.Spec.AllocateLoadBalancerNodePorts)
		assert.Equal(t, corev1.IPFamilyPolicySingleStack, *ph.Spec.IPFamilyPolicy)
		assert.Contains(t, suite.GetAddress(t, a.Name).Finalizers, marks.Finalizer)
		assert.Equal(t, fmt.Sprintf("Created placeholder Service %s/%s pinned to %s to hold the address while it is not attached",
			testPlaceholderNamespace, ph.Name, ip), suite.WaitEvent(t, fixture.About{Name: a.Name}, hold.ReasonHoldCreated).Message)

		// Deleted out of band: recreated, and MetalLB gives it the same address.
		require.NoError(t, adm.Delete(ctx, ph))
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			phs := suite.PlaceholdersOf(ct, a.Name)
			require.Len(ct, phs, 1)
			assert.NotEqual(ct, ph.UID, phs[0].UID)
		}, fixture.Timeout, fixture.Tick, "the hold is recreated")
		ph = requireHeldBy(t, a.Name, ip)

		// A pin tampered with is repaired, and MetalLB gives the address back.
		orig := ph.DeepCopy()
		ph.Annotations[marks.KeyPin] = map[bool]string{true: "192.0.2.4", false: "2001:db8:2::6"}[strings.Contains(ip, ".")]
		require.NoError(t, adm.Patch(ctx, ph, client.MergeFrom(orig)))
		repaired := requireHeldBy(t, a.Name, ip)
		assert.Equal(t, ph.UID, repaired.UID, "the same placeholder, re-pinned")
		assert.Contains(t, suite.WaitEvent(t, fixture.About{Name: a.Name}, hold.ReasonPinRepaired).Message, "re-pinned it to "+ip)

		// A sharing key written by hand is taken away again, on the same
		// placeholder, which keeps the address throughout.
		orig = repaired.DeepCopy()
		repaired.Annotations[marks.KeySharing] = "by-hand"
		require.NoError(t, adm.Patch(ctx, repaired, client.MergeFrom(orig)))
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			phs := suite.PlaceholdersOf(ct, a.Name)
			require.Len(ct, phs, 1)
			assert.Equal(ct, repaired.UID, phs[0].UID)
			assert.NotContains(ct, phs[0].Annotations, marks.KeySharing)
			assert.Equal(ct, []string{ip}, fixture.Ingress(&phs[0]))
		}, fixture.Timeout, fixture.Tick, "the sharing key is taken away")
	}

	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, 2, gaugeValue(ct, "fresh", stateHeld))
	}, fixture.Timeout, fixture.Tick, "metallb_iad_addresses counts both held addresses")
}

// gaugeValue reads metallb_iad_addresses for a class and state.
func gaugeValue(t require.TestingT, class, state string) int {
	var m dto.Metric
	require.NoError(t, addressesGauge.WithLabelValues(class, state).Write(&m))
	return int(m.GetGauge().GetValue())
}

// TestAssociationReleasesAndReArms: associating the address with a live
// Service deletes its placeholders and reports Held=False/ReleasedForWorkload,
// after which a pinned workload gets the address from MetalLB; deleting the
// workload clears the association and the hold comes back with the same IP.
func TestAssociationReleasesAndReArms(t *testing.T) {
	ctx := context.Background()
	ourClass(t, "assoc", "192.0.2.16/28")
	suite.Namespace(t, "tenant-a")
	const ip = "192.0.2.20"
	a := newAddress(t, "assoc", ip, &iadv1alpha1.ClaimReference{Namespace: "tenant-a", Name: "c1"})
	requireHeldBy(t, a.Name, ip)

	web := fixture.LoadBalancer("tenant-a", "web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: "c1"})
	require.NoError(t, adm.Create(ctx, web))
	suite.PatchAddressStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) {
		st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant-a", Name: "web"}
	})
	held := requireHeldCondition(t, a.Name, metav1.ConditionFalse, conditions.ReasonReleasedForWorkload)
	assert.Equal(t, "No placeholder holds the address: it is released for Service tenant-a/web", held.Message)
	assert.Empty(t, suite.PlaceholdersOf(t, a.Name))
	assert.Equal(t, "Deleted 1 placeholder Service(s) to release the address for Service tenant-a/web",
		suite.WaitEvent(t, fixture.About{Name: a.Name}, hold.ReasonHoldReleased).Message)

	// The Service controller's part: pin the workload; MetalLB has released
	// the address, so the workload gets exactly it.
	orig := web.DeepCopy()
	web.Annotations[marks.KeyPin] = ip
	web.Annotations[marks.KeyPinnedBy] = "c1"
	require.NoError(t, adm.Patch(ctx, web, client.MergeFrom(orig)))
	suite.WaitIngress(t, web, ip)
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, 1, gaugeValue(ct, "assoc", stateAssociated))
	}, fixture.Timeout, fixture.Tick)

	// The workload goes: the association is stale, cleared, and the hold is
	// re-armed with the same address.
	require.NoError(t, adm.Delete(ctx, web))
	requireHeldBy(t, a.Name, ip)
	assert.Nil(t, suite.GetAddress(t, a.Name).Status.AssociatedTo)
	assert.Equal(t, "Service tenant-a/web no longer exists: cleared the association and re-armed the hold",
		suite.WaitEvent(t, fixture.About{Name: a.Name}, ReasonAssociationCleared).Message)
}

// TestSharedAttachmentKeepsTheHold: associating the address with a
// Service that shares it with the hold placeholder (the driver's pin and
// the binding's sharing key, ports apart) deletes nothing: the same
// placeholder keeps holding the address beside the Service and Held
// reports it (SharedWithWorkload). Deleting the Service leaves the
// address held by that placeholder without a gap. A Service that stops
// being able to share (it takes the placeholder's port) gets the address
// alone: the placeholder lets go, as in the gap handoff.
func TestSharedAttachmentKeepsTheHold(t *testing.T) {
	ctx := context.Background()
	ourClass(t, "holdthrough", "192.0.2.176/29")
	suite.Namespace(t, "tenant-h")
	const ip = "192.0.2.178"
	a := newAddress(t, "holdthrough", ip, &iadv1alpha1.ClaimReference{Namespace: "tenant-h", Name: "c1"})
	hold := requireHeldBy(t, a.Name, ip)
	key := sharingkey.Keys{}.Of(a)

	sharing := func(name string) *corev1.Service {
		return fixture.LoadBalancer("tenant-h", name, map[string]string{
			iadv1alpha1.ServiceClaimAnnotation: "c1",
			marks.KeyPin:                       ip,
			marks.KeyPinnedBy:                  "c1",
			marks.KeySharing:                   key,
			marks.KeySharedBy:                  "c1",
		})
	}
	attach := func(name string) {
		suite.PatchAddressStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) {
			st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant-h", Name: name}
		})
	}

	// The Service controller's shared handoff: pin with the key, wait
	// until MetalLB shares the address, then associate.
	web := sharing("web")
	require.NoError(t, adm.Create(ctx, web))
	grantSharing(t, a.Name, "tenant-h", "web")
	suite.WaitIngress(t, web, ip)
	attach("web")
	held := requireHeldCondition(t, a.Name, metav1.ConditionTrue, conditions.ReasonSharedWithWorkload)
	assert.Equal(t, fmt.Sprintf("MetalLB assigned %s to placeholder Service %s/%s, which shares it with Service tenant-h/web, "+
		"the address is attached to (shared attachment): detaching or deleting that Service leaves the address held", ip, hold.Namespace, hold.Name), held.Message)
	phs := suite.PlaceholdersOf(t, a.Name)
	require.Len(t, phs, 1)
	assert.Equal(t, hold.UID, phs[0].UID, "attaching deletes nothing")
	assert.Equal(t, []string{ip}, fixture.Ingress(&phs[0]), "the placeholder keeps holding the address")
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, 1, gaugeValue(ct, "holdthrough", stateAssociated))
	}, fixture.Timeout, fixture.Tick)

	// Deleting the Service: the association is cleared, the same
	// placeholder holds the address.
	require.NoError(t, adm.Delete(ctx, web))
	assert.Equal(t, hold.UID, requireHeldBy(t, a.Name, ip).UID, "the hold held the address through the Service's deletion")
	assert.Nil(t, suite.GetAddress(t, a.Name).Status.AssociatedTo)

	// A Service that stops being able to share: the placeholder lets go.
	api := sharing("api")
	require.NoError(t, adm.Create(ctx, api))
	suite.WaitIngress(t, api, ip)
	attach("api")
	requireHeldCondition(t, a.Name, metav1.ConditionTrue, conditions.ReasonSharedWithWorkload)
	orig := api.DeepCopy()
	api.Spec.Ports = append(api.Spec.Ports, corev1.ServicePort{Name: "discard", Port: 9, TargetPort: intstr.FromInt32(9), Protocol: corev1.ProtocolTCP})
	require.NoError(t, adm.Patch(ctx, api, client.MergeFrom(orig)))
	requireHeldCondition(t, a.Name, metav1.ConditionFalse, conditions.ReasonReleasedForWorkload)
	assert.Empty(t, suite.PlaceholdersOf(t, a.Name))
	suite.WaitIngress(t, api, ip)
}

// TestStaleAssociationIsCleared: an association naming a Service that does
// not exist is cleared and the hold armed.
func TestStaleAssociationIsCleared(t *testing.T) {
	ourClass(t, "stale", "192.0.2.96/28")
	const ip = "192.0.2.99"
	a := newAddress(t, "stale", ip, nil)
	suite.PatchAddressStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) {
		st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "nowhere", Name: "ghost"}
	})
	assert.Equal(t, "Service nowhere/ghost no longer exists: cleared the association and re-armed the hold",
		suite.WaitEvent(t, fixture.About{Name: a.Name}, ReasonAssociationCleared).Message)
	requireHeldBy(t, a.Name, ip)
	assert.Nil(t, suite.GetAddress(t, a.Name).Status.AssociatedTo)
}

// TestTeardown: deleting addresses deletes their placeholders, withdraws the
// pin the driver wrote (marker) but not a hand-written one, removes only the
// driver's finalizer and leaves the core's in place.
func TestTeardown(t *testing.T) {
	ctx := context.Background()
	ourClass(t, "teardown", "192.0.2.32/28")
	suite.Namespace(t, "tenant-d")
	const attachedIP, heldIP = "192.0.2.40", "192.0.2.41"
	core := iadv1alpha1.AddressProtectionFinalizer

	attached := newAddress(t, "teardown", attachedIP, &iadv1alpha1.ClaimReference{Namespace: "tenant-d", Name: "c1"}, core)
	held := newAddress(t, "teardown", heldIP, nil, core)
	requireHeldBy(t, attached.Name, attachedIP)
	hold := requireHeldBy(t, held.Name, heldIP)

	web := fixture.LoadBalancer("tenant-d", "web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: "c1"})
	require.NoError(t, adm.Create(ctx, web))
	suite.PatchAddressStatus(t, attached.Name, func(st *iadv1alpha1.IPAddressStatus) {
		st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant-d", Name: "web"}
	})
	requireHeldCondition(t, attached.Name, metav1.ConditionFalse, conditions.ReasonReleasedForWorkload)
	orig := web.DeepCopy()
	web.Annotations[marks.KeyPin] = attachedIP
	web.Annotations[marks.KeyPinnedBy] = "c1"
	web.Annotations["example.com/keep"] = "yes"
	require.NoError(t, adm.Patch(ctx, web, client.MergeFrom(orig)))
	suite.WaitIngress(t, web, attachedIP)

	// A pin written by hand (no marker), on a Service MetalLB ignores.
	manual := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-d", Name: "manual",
			Annotations: map[string]string{marks.KeyPin: attachedIP}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	require.NoError(t, adm.Create(ctx, manual))

	require.NoError(t, adm.Delete(ctx, attached))
	require.NoError(t, adm.Delete(ctx, held))

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, name := range []string{attached.Name, held.Name} {
			a := suite.GetAddress(ct, name)
			assert.NotNil(ct, a.DeletionTimestamp)
			assert.Equal(ct, []string{core}, a.Finalizers, "only the driver's finalizer is removed")
			assert.Empty(ct, suite.PlaceholdersOf(ct, name))
		}
	}, fixture.Timeout, fixture.Tick, "teardown ran")
	err := adm.Get(ctx, client.ObjectKeyFromObject(hold), &corev1.Service{})
	assert.True(t, apierrors.IsNotFound(err), "the hold placeholder is deleted, got %v", err)

	got := &corev1.Service{}
	require.NoError(t, adm.Get(ctx, client.ObjectKeyFromObject(web), got))
	assert.NotContains(t, got.Annotations, marks.KeyPin, "the driver's pin is withdrawn")
	assert.NotContains(t, got.Annotations, marks.KeyPinnedBy, "the marker goes with it")
	assert.Equal(t, "yes", got.Annotations["example.com/keep"])
	assert.Equal(t, "c1", got.Annotations[iadv1alpha1.ServiceClaimAnnotation])
	assert.Empty(t, fixture.Ingress(got), "MetalLB took the address back before it left the ledger")
	assert.Equal(t, fmt.Sprintf("IPAddress %s (%s) was given up (claim tenant-d/c1): address given up, Service detached (the driver's pin is removed)", attached.Name, attachedIP),
		suite.WaitEvent(t, fixture.About{Namespace: "tenant-d", Name: "web"}, ReasonPinWithdrawn).Message)
	assert.Contains(t, suite.WaitEvent(t, fixture.About{Namespace: "tenant-d", Name: "web"}, ReasonReleasing).Message, `the pin is set to "::"`)

	require.NoError(t, adm.Get(ctx, client.ObjectKeyFromObject(manual), got))
	assert.Equal(t, attachedIP, got.Annotations[marks.KeyPin], "a hand-written pin is never touched")

	// The core's finalizer goes (as the core would drop it): the objects go.
	for _, name := range []string{attached.Name, held.Name} {
		a := suite.GetAddress(t, name)
		orig := a.DeepCopy()
		a.Finalizers = slices.DeleteFunc(a.Finalizers, func(f string) bool { return f == core })
		require.NoError(t, adm.Patch(ctx, a, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
		suite.WaitGone(t, fixture.Timeout, a)
	}
}

// TestTakenElsewhereThenConflictRecovery: a plain Service pinned to the IP
// before the address existed keeps the placeholder from getting it:
// Held=False/TakenElsewhere and a Warning Event naming it. In phase
// Conflict the address stays Conflict while that Service holds it, and is
// handed back to Available (no claimRef) once it is deleted; the hold then
// takes the address.
func TestTakenElsewhereThenConflictRecovery(t *testing.T) {
	ctx := context.Background()
	ourClass(t, "taken", "192.0.2.48/28")
	suite.Namespace(t, "intruder")
	const ip = "192.0.2.50"

	squatter := fixture.LoadBalancer("intruder", "squatter", map[string]string{marks.KeyPin: ip})
	require.NoError(t, adm.Create(ctx, squatter))
	suite.WaitIngress(t, squatter, ip)

	a := newAddress(t, "taken", ip, nil)
	held := requireHeldCondition(t, a.Name, metav1.ConditionFalse, conditions.ReasonTakenElsewhere)
	want := "Service intruder/squatter holds 192.0.2.50 in MetalLB without this address's authority, so the placeholder cannot; " +
		"the driver keeps the placeholder pinned to 192.0.2.50 and never substitutes another address"
	assert.Equal(t, want, held.Message)
	assert.Equal(t, want, suite.WaitEvent(t, fixture.About{Name: a.Name}, hold.ReasonAddressTakenElsewhere).Message)
	phs := suite.PlaceholdersOf(t, a.Name)
	require.Len(t, phs, 1)
	assert.Equal(t, ip, phs[0].Annotations[marks.KeyPin], "the pin stays")
	assert.Empty(t, phs[0].Status.LoadBalancer.Ingress, "no other address is taken instead")
	evs := suite.Events(t, fixture.About{Name: a.Name}, hold.ReasonAddressTakenElsewhere)
	require.Len(t, evs, 1)
	assert.Equal(t, corev1.EventTypeWarning, evs[0].Type)

	// As the Service controller would on detection.
	suite.PatchAddressStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) {
		st.Phase = iadv1alpha1.AddressConflict
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: conditions.Conflict, Status: metav1.ConditionTrue,
			Reason: conditions.ReasonUnauthorizedHolder, Message: "Service intruder/squatter holds the address"})
	})
	assert.Never(t, func() bool {
		return suite.GetAddress(t, a.Name).Status.Phase != iadv1alpha1.AddressConflict
	}, 4*time.Second, fixture.Tick, "the address stays Conflict while the squatter holds it")

	require.NoError(t, adm.Delete(ctx, squatter))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got := suite.GetAddress(ct, a.Name)
		assert.Equal(ct, iadv1alpha1.AddressAvailable, got.Status.Phase)
		cond := meta.FindStatusCondition(got.Status.Conditions, conditions.Conflict)
		require.NotNil(ct, cond)
		assert.Equal(ct, metav1.ConditionFalse, cond.Status)
		assert.Equal(ct, conditions.ReasonResolved, cond.Reason)
	}, fixture.Timeout, fixture.Tick, "handed back to Available")
	assert.Equal(t, "No Service holds the address without authority any more; phase handed back to Available",
		suite.WaitEvent(t, fixture.About{Name: a.Name}, ReasonConflictResolved).Message)
	requireHeldBy(t, a.Name, ip)
}

// TestConflictRecoveryToBound: a Service the binding authorizes does not keep
// an address in Conflict: it is handed back to Bound while the claim
// exists with the claimRef's uid, and to Available once the claim is gone.
func TestConflictRecoveryToBound(t *testing.T) {
	ctx := context.Background()
	ourClass(t, "bound", "192.0.2.64/28")
	suite.Namespace(t, "tenant-e")
	const ip = "192.0.2.70"

	claim := &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-e", Name: "c1"},
		Spec: iadv1alpha1.IPAddressClaimSpec{ClassName: "bound"}}
	require.NoError(t, adm.Create(ctx, claim))
	web := fixture.LoadBalancer("tenant-e", "web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: "c1",
		marks.KeyPin: ip, marks.KeyPinnedBy: "c1"})
	require.NoError(t, adm.Create(ctx, web))
	suite.WaitIngress(t, web, ip)

	a := newAddress(t, "bound", ip, &iadv1alpha1.ClaimReference{Namespace: "tenant-e", Name: "c1", UID: string(claim.UID)})
	suite.PatchAddressStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) {
		st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant-e", Name: "web"}
	})
	requireHeldCondition(t, a.Name, metav1.ConditionFalse, conditions.ReasonReleasedForWorkload)

	conflict := func(st *iadv1alpha1.IPAddressStatus) { st.Phase = iadv1alpha1.AddressConflict }
	wantPhase := func(phase iadv1alpha1.IPAddressPhase) {
		t.Helper()
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			got := suite.GetAddress(ct, a.Name)
			assert.Equal(ct, phase, got.Status.Phase)
			cond := meta.FindStatusCondition(got.Status.Conditions, conditions.Conflict)
			require.NotNil(ct, cond)
			assert.Equal(ct, conditions.ReasonResolved, cond.Reason)
			assert.Equal(ct, "No Service holds the address without authority any more; phase handed back to "+string(phase), cond.Message)
		}, fixture.Timeout, fixture.Tick, "handed back to %s", phase)
	}

	suite.PatchAddressStatus(t, a.Name, conflict)
	wantPhase(iadv1alpha1.AddressBound)

	require.NoError(t, adm.Delete(ctx, claim))
	suite.PatchAddressStatus(t, a.Name, conflict)
	wantPhase(iadv1alpha1.AddressAvailable)
	assert.True(t, strings.HasPrefix(suite.GetAddress(t, a.Name).Status.AssociatedTo.Name, "web"), "the association stands")
}
