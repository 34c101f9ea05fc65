//go:build integration

package service

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// The integration suite runs the service controller in-process, as its own
// ServiceAccount with the generated RBAC, against the real local control
// plane and the real MetalLB controller. The core and the claim controller
// are played by the tests (claims and addresses created and bound as the
// admin), and the IPAddress controller's side of the handoff by
// heldPartner: for addresses of classes named "sim-*" it reports Held False
// while associatedTo is set and Held True otherwise.

var (
	suite *fixture.Suite
	c     *cluster.Cluster
	// partnerPaused stops heldPartner while a test runs the real IPAddress
	// controller.
	partnerPaused atomic.Bool
)

// pausePartner stops heldPartner for the rest of the test.
func pausePartner(t testing.TB) {
	partnerPaused.Store(true)
	t.Cleanup(func() { partnerPaused.Store(false) })
}

const (
	// placeholderNS is the driver's placeholder namespace in this suite.
	placeholderNS = cluster.DriverNamespace
	// simulatedPrefix marks the classes whose addresses heldPartner serves.
	simulatedPrefix = "sim-"
	// manualHeld labels an address heldPartner leaves alone.
	manualHeld = "test.metallb-iad/manual-held"
)

func TestMain(m *testing.M) {
	fixture.Main(m, fixture.Options{Controller: countedController, LogFile: "service-controller.log", MetalLBLogLevel: "info"}, func(s *fixture.Suite) {
		suite, c = s, s.Cluster
		go heldPartner(s.Context())
	})
}

// heldPartner plays the IPAddress controller's part of the handoff for the
// simulated classes: Held False (ReleasedForWorkload) while the address is
// associated, Held True (HeldByPlaceholder) while it is not.
func heldPartner(ctx context.Context) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if partnerPaused.Load() {
			continue
		}
		var list iadv1alpha1.IPAddressList
		if err := c.Client.List(ctx, &list); err != nil {
			continue
		}
		for i := range list.Items {
			a := &list.Items[i]
			if !strings.HasPrefix(a.Spec.ClassName, simulatedPrefix) || a.Labels[manualHeld] != "" {
				continue
			}
			if a.Status.AssociatedTo != nil {
				_ = setHeld(ctx, a, metav1.ConditionFalse, conditions.ReasonReleasedForWorkload)
			} else {
				_ = setHeld(ctx, a, metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder)
			}
		}
	}
}

func setHeld(ctx context.Context, a *iadv1alpha1.IPAddress, status metav1.ConditionStatus, reason string) error {
	orig := a.DeepCopy()
	if !conditions.Set(&a.Status.Conditions, conditions.Held, status, reason, "simulated by the test", a.Generation) {
		return nil
	}
	return c.Client.Status().Patch(ctx, a, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// class creates an IPAddressClass served by the driver and its MetalLB pool
// (what the class controller renders), autoAssign off.
func class(t *testing.T, name string, cidrs ...string) {
	t.Helper()
	suite.Create(t, cluster.Class(name, "", ""), fixture.Pool(name, cidrs...))
}

// boundClaim creates a claim and its addresses bound to it, the way the
// claim controller and the core leave them: IPAddresses with claimRef
// (with uid) and phase Bound, the claim Bound and listing them.
func boundClaim(t *testing.T, ns, name, className string, family iadv1alpha1.IPFamily, ips ...string) (*iadv1alpha1.IPAddressClaim, []*iadv1alpha1.IPAddress) {
	t.Helper()
	claim := createClaim(t, ns, name, className, family)
	return claim, bind(t, claim, nil, ips...)
}

func createClaim(t testing.TB, ns, name, className string, family iadv1alpha1.IPFamily) *iadv1alpha1.IPAddressClaim {
	t.Helper()
	claim := &iadv1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       iadv1alpha1.IPAddressClaimSpec{ClassName: className, Family: family},
	}
	suite.Create(t, claim)
	return claim
}

// bind creates the claim's addresses (with labels) and marks both Bound.
func bind(t *testing.T, claim *iadv1alpha1.IPAddressClaim, labels map[string]string, ips ...string) []*iadv1alpha1.IPAddress {
	t.Helper()
	ctx := context.Background()
	var addrs []*iadv1alpha1.IPAddress
	var listed []iadv1alpha1.ClaimedAddress
	for _, ip := range ips {
		a := fixture.IPAddress(t, claim.Spec.ClassName, ip,
			&iadv1alpha1.ClaimReference{Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID)})
		a.Labels = labels
		a.Spec.ReclaimPolicy = iadv1alpha1.ReclaimRetain
		suite.Create(t, a)
		suite.PatchAddressStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) { st.Phase = iadv1alpha1.AddressBound })
		addrs = append(addrs, suite.GetAddress(t, a.Name))
		listed = append(listed, iadv1alpha1.ClaimedAddress{Name: a.Name, Address: a.Spec.Address})
	}
	require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim))
	claim.Status.Phase = iadv1alpha1.ClaimBound
	claim.Status.ClassName = claim.Spec.ClassName
	claim.Status.Addresses = listed
	require.NoError(t, c.Client.Status().Update(ctx, claim))
	return addrs
}

// lb is a LoadBalancer Service; claim, when set, is the tenant's annotation.
// It serves port 9/TCP, the placeholder's port, so MetalLB cannot let it
// share an address with a placeholder and the driver attaches it with the
// gap handoff: most of this suite has no real placeholders (heldPartner
// only plays the Held condition). sharedLB is the one that can share.
func lb(ns, name, claim string, fams ...corev1.IPFamily) *corev1.Service {
	s := sharedLB(ns, name, claim, fams...)
	s.Spec.Ports = []corev1.ServicePort{{Name: "discard", Port: 9, TargetPort: intstr.FromInt32(9), Protocol: corev1.ProtocolTCP}}
	return s
}

// sharedLB is a LoadBalancer Service (fixture.LoadBalancer) serving port
// 80/TCP with the default traffic policy (Cluster): MetalLB lets it share
// an address with a placeholder, so the driver attaches it with the shared
// handoff.
func sharedLB(ns, name, claim string, fams ...corev1.IPFamily) *corev1.Service {
	s := fixture.LoadBalancer(ns, name, nil, fams...)
	if claim != "" {
		s.Annotations[iadv1alpha1.ServiceClaimAnnotation] = claim
	}
	return s
}

// patchAnnotations merges annotations into a Service as its owner would
// (a value of "" removes the key).
func patchAnnotations(t *testing.T, ns, name string, ann map[string]string) {
	t.Helper()
	s := suite.GetService(t, ns, name)
	orig := s.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	for k, v := range ann {
		if v == "" {
			delete(s.Annotations, k)
		} else {
			s.Annotations[k] = v
		}
	}
	require.NoError(t, c.Client.Patch(context.Background(), s, client.MergeFrom(orig)))
}

// assertEvent asserts an Event of the type and reason about the object
// whose message contains every one of parts.
func assertEvent(t *assert.CollectT, kind, ns, name, typ, reason string, parts ...string) {
	fixture.AssertEvent(t, suite.Events(t, fixture.About{Kind: kind, Namespace: ns, Name: name}, ""), kind+" "+ns+"/"+name, typ, reason, parts...)
}

// assertAssociated waits for the whole forward handoff: associatedTo on
// every address, the pin and marker on the Service (and no finalizer), and
// MetalLB giving the Service exactly the pinned addresses.
func assertAssociated(t *testing.T, ns, svcName, claim, pin string, addrs ...*iadv1alpha1.IPAddress) {
	t.Helper()
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		for _, a := range addrs {
			got := suite.GetAddress(t, a.Name)
			assert.Equal(t, &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: ns, Name: svcName}, got.Status.AssociatedTo, a.Name)
		}
		s := suite.GetService(t, ns, svcName)
		assert.Equal(t, pin, s.Annotations[marks.KeyPin])
		assert.Equal(t, claim, s.Annotations[marks.KeyPinnedBy])
		assert.Empty(t, s.Finalizers, "no driver finalizer on a tenant's Service")
		// MetalLB may list them in another order (it sorts them as text).
		assert.ElementsMatch(t, strings.Split(pin, ","), fixture.Ingress(s), "MetalLB gives the Service exactly the pinned addresses")
	}, fixture.MetalLBTimeout, fixture.Tick)
}

func TestAssociatePinsService(t *testing.T) {
	class(t, "sim-assoc", "198.51.100.0/28")
	_, addrs := boundClaim(t, "assoc", "web-ip", "sim-assoc", iadv1alpha1.FamilyIPv4, "198.51.100.5")
	before := histogram(t, handoffSeconds).GetSampleCount()
	beforeUnheld := histogram(t, handoffUnheldSeconds).GetSampleCount()

	suite.Create(t, lb("assoc", "web", "web-ip"))
	assertAssociated(t, "assoc", "web", "web-ip", "198.51.100.5", addrs...)
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", "assoc", "web", corev1.EventTypeNormal, ReasonAssociated, `claim "web-ip"`, "198.51.100.5")
		assert.Greater(t, histogram(t, handoffSeconds).GetSampleCount(), before, "the handoff is measured")
		assert.Greater(t, histogram(t, handoffUnheldSeconds).GetSampleCount(), beforeUnheld, "the unheld gap is measured")
	}, fixture.Timeout, fixture.Tick)

	// The address stays Bound: association is not the core's business.
	assert.Equal(t, iadv1alpha1.AddressBound, suite.GetAddress(t, addrs[0].Name).Status.Phase)
}

func TestAssociateDualStack(t *testing.T) {
	class(t, "sim-dual", "198.51.100.16/28", "2001:db8:100:1::/124")
	// Created v6 first: the pin still lists v4 first.
	_, addrs := boundClaim(t, "dual", "both", "sim-dual", iadv1alpha1.FamilyDual, "2001:db8:100:1::5", "198.51.100.20")
	suite.Create(t, lb("dual", "web", "both", corev1.IPv4Protocol, corev1.IPv6Protocol))
	assertAssociated(t, "dual", "web", "both", "198.51.100.20,2001:db8:100:1::5", addrs...)
}

// TestPinWaitsForRelease checks step 2: associatedTo is written, but the
// Service gets no pin until the address reports Held False.
func TestPinWaitsForRelease(t *testing.T) {
	ctx := context.Background()
	class(t, "sim-wait", "198.51.100.32/28")
	claim := createClaim(t, "wait", "ip", "sim-wait", iadv1alpha1.FamilyIPv4)
	addrs := bind(t, claim, map[string]string{manualHeld: "true"}, "198.51.100.33")
	a := suite.GetAddress(t, addrs[0].Name)
	require.NoError(t, setHeld(ctx, a, metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder))

	suite.Create(t, lb("wait", "web", "ip"))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.NotNil(t, suite.GetAddress(t, a.Name).Status.AssociatedTo)
	}, fixture.Timeout, fixture.Tick, "step 1 runs")
	assert.Never(t, func() bool {
		s := &corev1.Service{}
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: "wait", Name: "web"}, s)
		_, pinned := s.Annotations[marks.KeyPin]
		return err != nil || pinned
	}, 2*time.Second, fixture.Tick, "no pin while the placeholder still holds the address")

	require.NoError(t, setHeld(ctx, suite.GetAddress(t, a.Name), metav1.ConditionFalse, conditions.ReasonReleasedForWorkload))
	assertAssociated(t, "wait", "web", "ip", "198.51.100.33", a)
}

func TestSecondServiceRejected(t *testing.T) {
	ctx := context.Background()
	class(t, "sim-second", "198.51.100.48/28")
	_, addrs := boundClaim(t, "second", "ip", "sim-second", iadv1alpha1.FamilyIPv4, "198.51.100.50")
	suite.Create(t, lb("second", "first", "ip"))
	assertAssociated(t, "second", "first", "ip", "198.51.100.50", addrs...)

	suite.Create(t, lb("second", "copycat", "ip"))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", "second", "copycat", corev1.EventTypeWarning, ReasonClaimAlreadyAssociated, `"ip"`, "Service second/first")
		assertEvent(t, "IPAddress", "", addrs[0].Name, corev1.EventTypeWarning, ReasonClaimAlreadyAssociated, "Service second/copycat", "Service second/first")
	}, fixture.Timeout, fixture.Tick)
	s := suite.GetService(t, "second", "copycat")
	assert.NotContains(t, s.Annotations, marks.KeyPin, "the second Service gets no pin")
	assert.NotContains(t, s.Annotations, marks.KeyPinnedBy)
	assert.Empty(t, s.Finalizers, "no driver finalizer on a tenant Service")
	assert.Empty(t, fixture.Ingress(s))
	assert.Equal(t, "first", suite.GetAddress(t, addrs[0].Name).Status.AssociatedTo.Name)

	// Once the first Service is gone, the one waiting gets the same address.
	require.NoError(t, c.Client.Delete(ctx, suite.GetService(t, "second", "first")))
	assertAssociated(t, "second", "copycat", "ip", "198.51.100.50", addrs...)
}

func TestClaimNotBoundThenAssociates(t *testing.T) {
	class(t, "sim-later", "198.51.100.64/28")
	suite.Create(t, lb("later", "web", "later-ip"))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", "later", "web", corev1.EventTypeWarning, ReasonClaimNotFound, `IPAddressClaim "later-ip" does not exist`)
	}, fixture.Timeout, fixture.Tick)

	claim := createClaim(t, "later", "later-ip", "sim-later", iadv1alpha1.FamilyIPv4)
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", "later", "web", corev1.EventTypeNormal, ReasonClaimNotBound, `IPAddressClaim "later-ip" is Pending, not Bound yet`)
	}, fixture.Timeout, fixture.Tick, "the claim's creation brings the Service back")
	s := suite.GetService(t, "later", "web")
	assert.NotContains(t, s.Annotations, marks.KeyPin)
	assert.Empty(t, s.Finalizers, "no driver finalizer on a tenant Service")

	addrs := bind(t, claim, nil, "198.51.100.66")
	assertAssociated(t, "later", "web", "later-ip", "198.51.100.66", addrs...)
}

func TestNotLoadBalancerRejected(t *testing.T) {
	class(t, "sim-clusterip", "198.51.100.80/28")
	_, addrs := boundClaim(t, "clusterip", "ip", "sim-clusterip", iadv1alpha1.FamilyIPv4, "198.51.100.81")
	s := lb("clusterip", "web", "ip")
	s.Spec.Type = corev1.ServiceTypeClusterIP
	s.Spec.AllocateLoadBalancerNodePorts = nil
	suite.Create(t, s)
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", "clusterip", "web", corev1.EventTypeWarning, ReasonNotLoadBalancer, "not of type LoadBalancer", `"ip"`)
	}, fixture.Timeout, fixture.Tick)
	got := suite.GetService(t, "clusterip", "web")
	assert.NotContains(t, got.Annotations, marks.KeyPin)
	assert.Empty(t, got.Finalizers, "no driver finalizer on a tenant Service")
	assert.Nil(t, suite.GetAddress(t, addrs[0].Name).Status.AssociatedTo)
}

// TestOtherLoadBalancerClassRejected: a Service of another load
// balancer's class, which MetalLB ignores, is not pinned, and says why.
func TestOtherLoadBalancerClassRejected(t *testing.T) {
	class(t, "sim-lbclass", "203.0.113.240/28")
	_, addrs := boundClaim(t, "lbclass", "ip", "sim-lbclass", iadv1alpha1.FamilyIPv4, "203.0.113.241")
	s := lb("lbclass", "web", "ip")
	s.Spec.LoadBalancerClass = new("gateway.nginx.org/nginx-gateway-controller")
	suite.Create(t, s)
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", "lbclass", "web", corev1.EventTypeWarning, ReasonOtherLoadBalancerClass,
			`spec.loadBalancerClass is "gateway.nginx.org/nginx-gateway-controller"`, `claim "ip"`)
	}, fixture.Timeout, fixture.Tick)
	got := suite.GetService(t, "lbclass", "web")
	assert.NotContains(t, got.Annotations, marks.KeyPin)
	assert.Nil(t, suite.GetAddress(t, addrs[0].Name).Status.AssociatedTo)
}

func TestFamilyMismatchRejected(t *testing.T) {
	class(t, "sim-family", "198.51.100.96/28", "2001:db8:100:2::/124")
	_, dual := boundClaim(t, "family", "dual", "sim-family", iadv1alpha1.FamilyDual, "198.51.100.97", "2001:db8:100:2::7")
	_, v6 := boundClaim(t, "family", "v6", "sim-family", iadv1alpha1.FamilyIPv6, "2001:db8:100:2::8")
	suite.Create(t, lb("family", "single", "dual"))
	suite.Create(t, lb("family", "v4only", "v6"))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", "family", "single", corev1.EventTypeWarning, ReasonFamilyMismatch,
			`IPAddressClaim "dual" is Dual`, "single-stack IPv4", "RequireDualStack")
		assertEvent(t, "Service", "family", "v4only", corev1.EventTypeWarning, ReasonFamilyMismatch,
			`IPAddressClaim "v6" holds an IPv6 address but the Service is single-stack IPv4`)
	}, fixture.Timeout, fixture.Tick)
	for _, a := range append(dual, v6...) {
		assert.Nil(t, suite.GetAddress(t, a.Name).Status.AssociatedTo, a.Name)
	}
	for _, n := range []string{"single", "v4only"} {
		s := suite.GetService(t, "family", n)
		assert.NotContains(t, s.Annotations, marks.KeyPin, n)
		assert.Empty(t, fixture.Ingress(s), n)
	}
}

// TestDetachByRemovingAnnotation removes the annotation: the driver's pin is
// withdrawn, MetalLB takes the address back, associatedTo is cleared, the
// address stays Bound, and another Service then gets the same address.
func TestDetachByRemovingAnnotation(t *testing.T) {
	class(t, "sim-detach", "198.51.100.112/28")
	_, addrs := boundClaim(t, "detach", "ip", "sim-detach", iadv1alpha1.FamilyIPv4, "198.51.100.113")
	suite.Create(t, lb("detach", "web", "ip"))
	assertAssociated(t, "detach", "web", "ip", "198.51.100.113", addrs...)

	patchAnnotations(t, "detach", "web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		s := suite.GetService(t, "detach", "web")
		assert.NotContains(t, s.Annotations, marks.KeyPin, "pin withdrawn")
		assert.NotContains(t, s.Annotations, marks.KeyPinnedBy, "marker withdrawn")
		assert.Empty(t, s.Finalizers, "no driver finalizer on a tenant Service")
		assert.Empty(t, fixture.Ingress(s), "MetalLB took the address back")
		a := suite.GetAddress(t, addrs[0].Name)
		assert.Nil(t, a.Status.AssociatedTo)
		assert.Equal(t, iadv1alpha1.AddressBound, a.Status.Phase, "the address stays Bound")
		assertEvent(t, "Service", "detach", "web", corev1.EventTypeNormal, ReasonDetached, "198.51.100.113", addrs[0].Name)
	}, fixture.Timeout, fixture.Tick)

	suite.Create(t, lb("detach", "other", "ip"))
	assertAssociated(t, "detach", "other", "ip", "198.51.100.113", addrs...)
}

// TestHandWrittenPinUntouched: a pin the driver did not write is never
// withdrawn, and never overwritten.
func TestHandWrittenPinUntouched(t *testing.T) {
	class(t, "sim-hand", "198.51.100.128/28")
	_, addrs := boundClaim(t, "hand", "ip", "sim-hand", iadv1alpha1.FamilyIPv4, "198.51.100.129")

	// Pinned by hand to another address: refused, nothing touched.
	elsewhere := lb("hand", "elsewhere", "ip")
	elsewhere.Annotations[marks.KeyPin] = "198.51.100.140"
	suite.Create(t, elsewhere)
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", "hand", "elsewhere", corev1.EventTypeWarning, ReasonPinnedByHand, "198.51.100.140", `claim "ip"`)
	}, fixture.Timeout, fixture.Tick)
	s := suite.GetService(t, "hand", "elsewhere")
	assert.Equal(t, "198.51.100.140", s.Annotations[marks.KeyPin])
	assert.NotContains(t, s.Annotations, marks.KeyPinnedBy)
	assert.Nil(t, suite.GetAddress(t, addrs[0].Name).Status.AssociatedTo)
	require.NoError(t, c.Client.Delete(context.Background(), s))

	// Pinned by hand to the claim's address: associated without authorship.
	same := lb("hand", "same", "ip")
	same.Annotations[marks.KeyPin] = "198.51.100.129"
	suite.Create(t, same)
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		if at := suite.GetAddress(t, addrs[0].Name).Status.AssociatedTo; assert.NotNil(t, at) {
			assert.Equal(t, "same", at.Name)
		}
		assert.Equal(t, []string{"198.51.100.129"}, fixture.Ingress(suite.GetService(t, "hand", "same")))
	}, fixture.Timeout, fixture.Tick)

	patchAnnotations(t, "hand", "same", map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.Nil(t, suite.GetAddress(t, addrs[0].Name).Status.AssociatedTo)
		s := suite.GetService(t, "hand", "same")
		assert.Empty(t, s.Finalizers, "no driver finalizer on a tenant Service")
	}, fixture.Timeout, fixture.Tick)
	s = suite.GetService(t, "hand", "same")
	assert.Equal(t, "198.51.100.129", s.Annotations[marks.KeyPin], "the hand-written pin stays")
	assert.NotContains(t, s.Annotations, marks.KeyPinnedBy)
	// Still holding the address, now without authority: that is a conflict.
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.Equal(t, iadv1alpha1.AddressConflict, suite.GetAddress(t, addrs[0].Name).Status.Phase)
	}, fixture.Timeout, fixture.Tick)
}

func TestServiceDeletionDetaches(t *testing.T) {
	ctx := context.Background()
	class(t, "sim-delete", "198.51.100.144/28")
	_, addrs := boundClaim(t, "delete", "ip", "sim-delete", iadv1alpha1.FamilyIPv4, "198.51.100.145")
	suite.Create(t, lb("delete", "web", "ip"))
	assertAssociated(t, "delete", "web", "ip", "198.51.100.145", addrs...)

	require.NoError(t, c.Client.Delete(ctx, suite.GetService(t, "delete", "web")))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: "delete", Name: "web"}, &corev1.Service{})
		assert.True(t, apierrors.IsNotFound(err), "the Service is gone: %v", err)
		a := suite.GetAddress(t, addrs[0].Name)
		assert.Nil(t, a.Status.AssociatedTo)
		assert.Equal(t, iadv1alpha1.AddressBound, a.Status.Phase)
		assertEvent(t, "IPAddress", "", addrs[0].Name, corev1.EventTypeNormal, ReasonDetached, "Service delete/web")
	}, fixture.Timeout, fixture.Tick)
}

// TestStaleAssociationCleared: an address associated with a Service that
// does not exist (its finalizer removed by hand, say) is detached.
func TestStaleAssociationCleared(t *testing.T) {
	class(t, "sim-stale", "198.51.100.160/28")
	_, addrs := boundClaim(t, "stale", "ip", "sim-stale", iadv1alpha1.FamilyIPv4, "198.51.100.161")
	a := addrs[0]
	suite.PatchAddressStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) {
		st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "stale", Name: "ghost"}
	})
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.Nil(t, suite.GetAddress(t, a.Name).Status.AssociatedTo)
		assertEvent(t, "IPAddress", "", a.Name, corev1.EventTypeNormal, ReasonDetached, "Service stale/ghost, which was deleted")
	}, fixture.Timeout, fixture.Tick)
}

// TestConflictDetection: a plain Service pinned by hand to a ledger address
// gets it from MetalLB; the address goes Conflict, naming the Service, and
// both sides get Events naming each other.
func TestConflictDetection(t *testing.T) {
	class(t, "sim-conflict", "198.51.100.176/28")
	_, addrs := boundClaim(t, "conflict-owner", "ip", "sim-conflict", iadv1alpha1.FamilyIPv4, "198.51.100.177")
	squatter := lb("conflict-tenant", "squatter", "")
	squatter.Annotations[marks.KeyPin] = "198.51.100.177"
	suite.Create(t, squatter)

	assertConflict(t, "conflict-tenant", "squatter", addrs[0].Name, "198.51.100.177", "claim conflict-owner/ip")
}

func assertConflict(t *testing.T, ns, name, addr, ip, binding string) {
	t.Helper()
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.Equal(t, []string{ip}, fixture.Ingress(suite.GetService(t, ns, name)), "MetalLB honours the hand pin")
		a := suite.GetAddress(t, addr)
		assert.Equal(t, iadv1alpha1.AddressConflict, a.Status.Phase)
		cond := meta.FindStatusCondition(a.Status.Conditions, conditions.Conflict)
		if assert.NotNil(t, cond) {
			assert.Equal(t, metav1.ConditionTrue, cond.Status)
			assert.Equal(t, conditions.ReasonUnauthorizedHolder, cond.Reason)
			assert.Contains(t, cond.Message, "Service "+ns+"/"+name+" holds "+ip)
		}
		assertEvent(t, "Service", ns, name, corev1.EventTypeWarning, ReasonAddressConflict, ip, "IPAddress "+addr, binding)
		assertEvent(t, "IPAddress", "", addr, corev1.EventTypeWarning, ReasonAddressConflict, "Service "+ns+"/"+name, ip)
	}, fixture.Timeout, fixture.Tick)
}

// TestPlaceholderExemptOnlyInPlaceholderNamespace: the placeholder label
// exempts a Service from conflict detection only inside the placeholder
// namespace.
func TestPlaceholderExemptOnlyInPlaceholderNamespace(t *testing.T) {
	class(t, "sim-forged", "198.51.100.192/28")
	_, forgedAddrs := boundClaim(t, "forged-owner", "a", "sim-forged", iadv1alpha1.FamilyIPv4, "198.51.100.193")
	_, heldAddrs := boundClaim(t, "forged-owner", "b", "sim-forged", iadv1alpha1.FamilyIPv4, "198.51.100.194")

	forged := lb("forged-tenant", "hold-ip-198-51-100-193", "")
	forged.Labels = map[string]string{marks.LabelPlaceholder: names.PlaceholderHold, marks.LabelAddress: forgedAddrs[0].Name}
	forged.Annotations[marks.KeyPin] = "198.51.100.193"
	suite.Create(t, forged)
	assertConflict(t, "forged-tenant", forged.Name, forgedAddrs[0].Name, "198.51.100.193", "claim forged-owner/a")

	real := lb(placeholderNS, "hold-ip-198-51-100-194", "")
	real.Labels = map[string]string{marks.LabelPlaceholder: names.PlaceholderHold, marks.LabelAddress: heldAddrs[0].Name}
	real.Annotations[marks.KeyPin] = "198.51.100.194"
	suite.Create(t, real)
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.Equal(t, []string{"198.51.100.194"}, fixture.Ingress(suite.GetService(t, placeholderNS, real.Name)))
	}, fixture.Timeout, fixture.Tick)
	assert.Never(t, func() bool {
		a := &iadv1alpha1.IPAddress{}
		err := c.Client.Get(context.Background(), client.ObjectKey{Name: heldAddrs[0].Name}, a)
		return err != nil || a.Status.Phase == iadv1alpha1.AddressConflict
	}, 2*time.Second, fixture.Tick, "a placeholder in the placeholder namespace is exempt")
}
