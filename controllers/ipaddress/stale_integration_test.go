//go:build integration

package ipaddress

import (
	"context"
	"testing"

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
	"github.com/cozystack/metallb-iad/internal/stale"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// startingWindow restarts MetalLB and keeps it in its start-up window
// (cluster.StartingWindow) with a blocker Service in namespace ns pinned to
// blockerIP, an address of class; booked is how many addresses of class
// MetalLB's first pass books.
func startingWindow(t *testing.T, ns, class, blockerIP string, booked int64) (end func()) {
	t.Helper()
	blocker := fixture.LoadBalancer(ns, "blocker", map[string]string{marks.KeyPin: blockerIP})
	return suite.StartingWindow(t, blocker, names.PoolName(class), booked)
}

// heldAddress makes class (with the range cidr) and an address of ip in it,
// bound to ref if not nil, and waits until its hold holds ip.
func heldAddress(t *testing.T, class, cidr, ip string, ref *iadv1alpha1.ClaimReference) *iadv1alpha1.IPAddress {
	t.Helper()
	ourClass(t, class, cidr)
	a := newAddress(t, class, ip, ref)
	requireHeldBy(t, a.Name, ip)
	return a
}

// attachTo records the address as attached to the Service ns/name and
// waits until its hold goes. The Service first gets the grant label of the
// address's class, as the Service controller gives every Service it
// attaches (an associated Service without it, and without the driver's
// marker, is one the driver is letting go: marks.LetGo).
func attachTo(t *testing.T, address, ns, name string) {
	t.Helper()
	svc := &corev1.Service{}
	require.NoError(t, adm.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc))
	orig := svc.DeepCopy()
	if svc.Labels == nil {
		svc.Labels = map[string]string{}
	}
	svc.Labels[marks.LabelGrant] = suite.GetAddress(t, address).Spec.ClassName
	require.NoError(t, adm.Patch(context.Background(), svc, client.MergeFrom(orig)))
	suite.PatchAddressStatus(t, address, func(st *iadv1alpha1.IPAddressStatus) {
		st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: ns, Name: name}
	})
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Empty(ct, suite.PlaceholdersOf(ct, address)) }, fixture.Timeout, fixture.Tick)
}

// attachToIdle makes namespace ns and a ClusterIP Service "idle" in it,
// which does not take the address, and attaches the address to it, so the
// address's hold goes.
func attachToIdle(t *testing.T, address, ns string) {
	t.Helper()
	suite.Namespace(t, ns)
	idle := fixture.LoadBalancer(ns, "idle", nil)
	idle.Spec.Type = corev1.ServiceTypeClusterIP
	idle.Spec.AllocateLoadBalancerNodePorts = nil
	require.NoError(t, adm.Create(context.Background(), idle))
	attachTo(t, address, ns, "idle")
}

// formerPlaceholder makes a Service shaped like a placeholder of an address
// (in the placeholder namespace, pinned to ip with the address's sharing
// key, on the hold's port) and waits until MetalLB has given it ip.
func formerPlaceholder(t *testing.T, name, ip, key string) *corev1.Service {
	t.Helper()
	former := fixture.LoadBalancer(testPlaceholderNamespace, name, map[string]string{
		marks.KeyPin: ip, marks.KeySharing: key,
	})
	former.Spec.Selector = nil
	former.Spec.Ports = []corev1.ServicePort{{Name: "hold", Port: 9, TargetPort: intstr.FromInt32(9), Protocol: corev1.ProtocolTCP}}
	require.NoError(t, adm.Create(context.Background(), former))
	suite.WaitIngress(t, former, ip)
	suite.WaitEvent(t, fixture.About{Namespace: testPlaceholderNamespace, Name: former.Name}, "IPAllocated")
	return former
}

// deleteInStartingWindow deletes svc, the holder of the address, inside
// MetalLB's start-up window (startingWindow, the blocker in ns), runs then
// (if not nil), waits until MetalLB, still starting, refuses the address's
// re-armed hold (AllocationFailed), and ends the window.
func deleteInStartingWindow(t *testing.T, ns, class, blockerIP, address string, svc *corev1.Service, then func()) {
	t.Helper()
	ctx := context.Background()
	end := startingWindow(t, ns, class, blockerIP, 2)
	require.NoError(t, adm.Delete(ctx, svc))
	suite.WaitGone(t, fixture.Timeout, svc)
	if then != nil {
		then()
	}
	suite.WaitEvent(t, fixture.About{Namespace: testPlaceholderNamespace, Name: placeholder.HoldName(address)}, "AllocationFailed")
	end()
}

// requireCleared waits, with room for MetalLB's backoff
// (fixture.MetalLBTimeout), until the address's hold gets ip again, and
// checks that the address tells the stale
// allocation of holder ("namespace/name") was cleared.
func requireCleared(t *testing.T, address, ip, holder string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		phs := suite.PlaceholdersOf(ct, address)
		require.Len(ct, phs, 1)
		assert.Equal(ct, []string{ip}, fixture.Ingress(&phs[0]))
	}, fixture.MetalLBTimeout, fixture.Tick, "the re-armed hold gets the address MetalLB booked for a deleted Service")
	requireHeldBy(t, address, ip)
	assert.Contains(t, suite.WaitEvent(t, fixture.About{Name: address}, hold.ReasonStaleAllocationCleared).Message, holder)
}

// TestStaleAllocationCleared: MetalLB v0.15.2 ignores Service events until
// its first full pass over the Services succeeds, so a Service deleted in
// that window keeps its address in MetalLB's books, invisible in the API.
// The test deletes the attached Service inside that window, then lets
// MetalLB finish starting. The re-armed hold placeholder is refused
// ("address also in use by" the deleted Service) and would stay without
// the address until MetalLB restarts; the controller clears the stale
// allocation and the hold gets the address back.
func TestStaleAllocationCleared(t *testing.T) {
	ctx := context.Background()
	const ip, blockerIP = "192.0.2.146", "192.0.2.150"
	a := heldAddress(t, "ghost", "192.0.2.144/29", ip, nil)

	// Attach a Service that cannot share with the hold (it uses the
	// placeholder's port and no key): the hold goes, the Service holds.
	suite.Namespace(t, "ghost-tenant")
	web := fixture.LoadBalancer("ghost-tenant", "web", map[string]string{marks.KeyPin: ip})
	web.Spec.Ports = []corev1.ServicePort{{Name: "disc", Port: 9, TargetPort: intstr.FromInt32(9), Protocol: corev1.ProtocolTCP}}
	require.NoError(t, adm.Create(ctx, web))
	attachTo(t, a.Name, "ghost-tenant", "web")
	suite.WaitIngress(t, web, ip)

	// The driver re-arms the hold; MetalLB, still starting, refuses it the
	// address it books for the deleted web.
	deleteInStartingWindow(t, "ghost-tenant", "ghost", blockerIP, a.Name, web, nil)

	requireCleared(t, a.Name, ip, "ghost-tenant/web")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		err := adm.Get(ctx, client.ObjectKeyFromObject(web), &corev1.Service{})
		assert.True(ct, apierrors.IsNotFound(err), "the Service that cleared the allocation is gone again")
	}, fixture.Timeout, fixture.Tick)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, ph := range suite.PlaceholdersOf(ct, a.Name) {
			assert.NotContains(ct, ph.Annotations, marks.KeyMetalLBRetry, "the retry mark goes once the hold holds")
		}
	}, fixture.Timeout, fixture.Tick)
}

// TestStaleAllocationOfFormerPlaceholderCleared: the Service deleted in
// MetalLB's start-up window is a former placeholder of the address, with
// the address's own sharing key. MetalLB then names nobody ("port TCP/9 is
// already in use"); the controller finds the former holder in MetalLB's
// IPAllocated Events of the placeholder namespace and clears it.
func TestStaleAllocationOfFormerPlaceholderCleared(t *testing.T) {
	const ip, blockerIP = "192.0.2.154", "192.0.2.158"
	a := heldAddress(t, "former", "192.0.2.152/29", ip, &iadv1alpha1.ClaimReference{Namespace: "former-tenant", Name: "db-ip", UID: "0d4b0c7e-0000-4000-8000-00000000f0f0"})

	// The address is attached to a Service that does not take it (no pin),
	// so its hold goes; a placeholder-shaped Service with the address's key
	// takes the address instead, as an allocation placeholder would.
	attachToIdle(t, a.Name, "former-tenant")
	former := formerPlaceholder(t, "former-placeholder", ip, sharingkey.Keys{}.Of(suite.GetAddress(t, a.Name)))

	deleteInStartingWindow(t, "former-tenant", "former", blockerIP, a.Name, former, func() {
		suite.PatchAddressStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) { st.AssociatedTo = nil })
	})

	requireCleared(t, a.Name, ip, testPlaceholderNamespace+"/former-placeholder")
}

// TestStaleAllocationClearedWhileHandingBack: the address is being handed
// back in the shared handoff. Its attached Service shares it with the
// address's key (the driver's pin for its claim) without the driver's
// shared-by marker (taken off by hand), so the hold was not kept through
// the attachment, and it is detached
// (associatedTo cleared) while a former placeholder deleted in MetalLB's
// start-up window is still booked. The Service keeps the address until the
// re-armed hold shares it, so the address is not unheld; but MetalLB
// refuses the hold ("port TCP/9 is already in use"), and without the
// stale allocation cleared the hold and the Service would wait for each
// other for good. The controller clears it and the hold gets the address.
func TestStaleAllocationClearedWhileHandingBack(t *testing.T) {
	ctx := context.Background()
	const ip, blockerIP = "192.0.2.162", "192.0.2.166"
	a := heldAddress(t, "handback", "192.0.2.160/29", ip, &iadv1alpha1.ClaimReference{Namespace: "handback-tenant", Name: "web-ip", UID: "0d4b0c7e-0000-4000-8000-00000000f1f1"})
	key := sharingkey.Keys{}.Of(suite.GetAddress(t, a.Name))

	// A shared handoff whose marker is gone: the hold carries the key (a
	// key on a hold stays), web shares the address with it, then is
	// attached and the hold goes (without the shared-by marker the
	// attachment is not a shared one, marks.SharesHold).
	hold := suite.PlaceholdersOf(t, a.Name)[0]
	orig := hold.DeepCopy()
	hold.Annotations[marks.KeySharing] = key
	require.NoError(t, adm.Patch(ctx, &hold, client.MergeFrom(orig)))
	suite.Namespace(t, "handback-tenant")
	web := fixture.LoadBalancer("handback-tenant", "web", map[string]string{
		marks.KeyPin: ip, marks.KeySharing: key,
		marks.KeyPinnedBy:                  "web-ip",
		iadv1alpha1.ServiceClaimAnnotation: "web-ip",
	})
	require.NoError(t, adm.Create(ctx, web))
	suite.WaitIngress(t, web, ip)
	attachTo(t, a.Name, "handback-tenant", "web")

	// A placeholder-shaped Service with the address's key shares it too,
	// as the claim's allocation placeholder does during an attach.
	former := formerPlaceholder(t, "handback-former", ip, key)

	// The shared detach: associatedTo cleared while web keeps the address.
	deleteInStartingWindow(t, "handback-tenant", "handback", blockerIP, a.Name, former, func() {
		suite.PatchAddressStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) { st.AssociatedTo = nil })
	})

	requireCleared(t, a.Name, ip, testPlaceholderNamespace+"/handback-former")
	suite.WaitIngress(t, web, ip)
}

// TestStaleAllocationClearedInSharedAttachment: the address is attached in
// a shared attachment, so its hold should hold it beside the Service. The
// placeholder that held it (here a placeholder-shaped Service with the
// address's key, as the claim's allocation placeholder is once handed
// over) is deleted in MetalLB's start-up window, and the re-armed hold is
// refused ("port TCP/9 is already in use") while the Service holds the
// address. The Service holding it does not make the hold's wait a conflict:
// the controller clears the stale allocation and the hold gets the address.
func TestStaleAllocationClearedInSharedAttachment(t *testing.T) {
	ctx := context.Background()
	const ip, blockerIP = "192.0.2.170", "192.0.2.174"
	a := heldAddress(t, "sharedstale", "192.0.2.168/29", ip, &iadv1alpha1.ClaimReference{Namespace: "sharedstale-tenant", Name: "web-ip", UID: "0d4b0c7e-0000-4000-8000-00000000f2f2"})
	key := sharingkey.Keys{}.Of(suite.GetAddress(t, a.Name))

	// The address's hold goes (attached to a Service that does not take
	// it); a placeholder-shaped Service with the address's key takes the
	// address, and web shares it with that one (the same key, ports apart).
	attachToIdle(t, a.Name, "sharedstale-tenant")
	former := formerPlaceholder(t, "sharedstale-former", ip, key)
	web := fixture.LoadBalancer("sharedstale-tenant", "web", map[string]string{
		marks.KeyPin: ip, marks.KeySharing: key,
		marks.KeyPinnedBy:                  "web-ip",
		marks.KeySharedBy:                  "web-ip",
		iadv1alpha1.ServiceClaimAnnotation: "web-ip",
	})
	require.NoError(t, adm.Create(ctx, web))
	suite.WaitIngress(t, web, ip)

	// The former placeholder is deleted while MetalLB is starting, and the
	// address is attached to web in a shared attachment: the controller
	// re-arms the hold beside web, and MetalLB refuses it.
	deleteInStartingWindow(t, "sharedstale-tenant", "sharedstale", blockerIP, a.Name, former, func() {
		suite.PatchAddressStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) {
			st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "sharedstale-tenant", Name: "web"}
		})
	})

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		phs := suite.PlaceholdersOf(ct, a.Name)
		require.Len(ct, phs, 1)
		assert.Equal(ct, []string{ip}, fixture.Ingress(&phs[0]))
		held := meta.FindStatusCondition(suite.GetAddress(ct, a.Name).Status.Conditions, conditions.Held)
		require.NotNil(ct, held)
		assert.Equal(ct, metav1.ConditionTrue, held.Status)
	}, fixture.MetalLBTimeout, fixture.Tick, "the re-armed hold gets the address beside web")
	assert.Contains(t, suite.WaitEvent(t, fixture.About{Name: a.Name}, hold.ReasonStaleAllocationCleared).Message, testPlaceholderNamespace+"/sharedstale-former")
	suite.WaitIngress(t, web, ip)
}

// TestPinRefusedForTheHoldIsAskedAgain: MetalLB refuses a pin to an
// address in use and never looks at that Service again by itself. A
// Service pinned to the address while its hold still holds it (a detach
// and a re-attach crossing: the pin written on a view about to change) is
// refused for the hold. Once the attachment parks the hold, the controller
// asks MetalLB to look at the Service again instead of reporting the
// attachment refused, and the Service gets the address. Parking moves the
// hold without a pass over every Service, so only that ask makes MetalLB
// look at the Service.
func TestPinRefusedForTheHoldIsAskedAgain(t *testing.T) {
	ctx := context.Background()
	suite.CreateForTest(t, cluster.ParkingPool(testPlaceholderNamespace))
	const ip = "192.0.2.232"
	a := heldAddress(t, "refused-hold", "192.0.2.232/29", ip, &iadv1alpha1.ClaimReference{Namespace: "refused-hold", Name: "c1"})
	suite.Namespace(t, "refused-hold")
	hold := placeholder.HoldName(a.Name)

	web := fixture.LoadBalancer("refused-hold", "web", map[string]string{
		iadv1alpha1.ServiceClaimAnnotation: "c1", marks.KeyPin: ip, marks.KeyPinnedBy: "c1",
	})
	web.Labels = map[string]string{marks.LabelGrant: "refused-hold"}
	require.NoError(t, adm.Create(ctx, web))
	about := fixture.About{Namespace: "refused-hold", Name: "web"}
	assert.Contains(t, suite.WaitEvent(t, about, stale.AllocationFailed).Message, testPlaceholderNamespace+"/"+hold, "refused for the hold")

	suite.PatchAddressStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) {
		st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "refused-hold", Name: "web"}
	})
	suite.WaitIngress(t, web, ip)
	assert.Empty(t, suite.Events(t, about, ReasonAttachmentRefused), "not reported refused")
	assert.Empty(t, suite.Events(t, fixture.About{Name: a.Name}, ReasonAttachmentRefused))
	served := meta.FindStatusCondition(suite.GetAddress(t, a.Name).Status.Conditions, conditions.AttachmentServed)
	assert.True(t, served == nil || served.Status == metav1.ConditionTrue, "AttachmentServed: %v", served)
	phs := suite.PlaceholdersOf(t, a.Name)
	if assert.Len(t, phs, 1) {
		assert.Equal(t, hold, phs[0].Name, "the hold was parked, not deleted")
		assert.NotContains(t, fixture.Ingress(&phs[0]), ip)
	}
}

// TestLetGoServiceIsWaitedFor: a Service the driver let go in one write (no
// claim, pin, marker or grant label left) still shows the address while
// MetalLB has not looked at it again, and its association is already
// cleared, as when the annotation moves to the next Service at once. The
// class's pool admits only granted Services, so MetalLB is taking the
// address from it: the controller waits for that and records no
// AddressTakenElsewhere Warning, then pins the hold back.
func TestLetGoServiceIsWaitedFor(t *testing.T) {
	ctx := context.Background()
	suite.CreateForTest(t, cluster.ParkingPool(testPlaceholderNamespace))
	const class, ip = "let-go", "192.0.2.240"
	pool := fixture.Pool(class, "192.0.2.240/29")
	marks.WithGrant(pool, class)
	suite.Create(t, pool, cluster.Class(class, "", ""))
	a := newAddress(t, class, ip, &iadv1alpha1.ClaimReference{Namespace: "let-go", Name: "c1"})
	requireHeldBy(t, a.Name, ip)
	suite.Namespace(t, "let-go")

	web := fixture.LoadBalancer("let-go", "web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: "c1", marks.KeyPinnedBy: "c1"})
	web.Labels = map[string]string{marks.LabelGrant: class}
	require.NoError(t, adm.Create(ctx, web))
	suite.PatchAddressStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) {
		st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "let-go", Name: "web"}
	})
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		phs := suite.PlaceholdersOf(ct, a.Name)
		require.Len(ct, phs, 1)
		assert.NotContains(ct, fixture.Ingress(&phs[0]), ip)
	}, fixture.MetalLBTimeout, fixture.Tick, "the hold is parked away")
	edit(t, web, func() { web.Annotations[marks.KeyPin] = ip })
	suite.WaitIngress(t, web, ip)

	suite.StopMetalLB()
	t.Cleanup(func() {
		if suite.MetalLB().Exited() {
			_ = suite.StartMetalLB(ctx)
		}
	})
	edit(t, web, func() {
		delete(web.Annotations, iadv1alpha1.ServiceClaimAnnotation)
		delete(web.Annotations, marks.KeyPin)
		delete(web.Annotations, marks.KeyPinnedBy)
		delete(web.Labels, marks.LabelGrant)
	})
	suite.PatchAddressStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) { st.AssociatedTo = nil })
	c := requireHeldCondition(t, a.Name, metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB)
	assert.Contains(t, c.Message, "Waiting for MetalLB to take "+ip+" from Service let-go/web")
	assert.Empty(t, suite.Events(t, fixture.About{Name: a.Name}, hold.ReasonAddressTakenElsewhere))

	require.NoError(t, suite.StartMetalLB(ctx))
	requireHeldBy(t, a.Name, ip)
	assert.Empty(t, suite.Events(t, fixture.About{Name: a.Name}, hold.ReasonAddressTakenElsewhere))
}

// edit patches svc with change, as the Service controller writes it.
func edit(t *testing.T, svc *corev1.Service, change func()) {
	t.Helper()
	orig := svc.DeepCopy()
	change()
	require.NoError(t, adm.Patch(context.Background(), svc, client.MergeFrom(orig)))
}
