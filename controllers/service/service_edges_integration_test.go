//go:build integration

package service

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// deleteClass creates an IPAddressClass with reclaimPolicy Delete and its
// MetalLB pool (what the class controller renders), autoAssign off.
func deleteClass(t *testing.T, name string, cidrs ...string) {
	t.Helper()
	suite.Create(t, cluster.Class(name, iadv1alpha1.ReclaimDelete, ""), fixture.Pool(name, cidrs...))
}

// pinWatch records, from a watch on the Services of a namespace, every
// Service that ever carried a MetalLB pin.
type pinWatch struct {
	mu     sync.Mutex
	pinned map[string]bool
	cancel context.CancelFunc
	done   chan struct{}
}

func watchPins(t *testing.T, ns string) *pinWatch {
	t.Helper()
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Client.Scheme()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	w := &pinWatch{pinned: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	watcher, err := wc.Watch(ctx, &corev1.ServiceList{}, client.InNamespace(ns))
	require.NoError(t, err)
	go func() {
		defer close(w.done)
		defer watcher.Stop()
		for ev := range watcher.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			s := ev.Object.(*corev1.Service)
			if s.Annotations[marks.KeyPin] != "" {
				w.mu.Lock()
				w.pinned[s.Name] = true
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-w.done })
	return w
}

func (w *pinWatch) wasPinned(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pinned[name]
}

// assertNoEvent asserts that no Event of the reason about the object
// contains every one of parts.
func assertNoEvent(t *testing.T, kind, ns, name, reason string, parts ...string) {
	t.Helper()
	for _, e := range suite.Events(t, fixture.About{Kind: kind, Namespace: ns, Name: name}, "") {
		if e.Reason != reason {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(e.Message, p)
		}
		assert.False(t, all, "unexpected %s Event on %s %s/%s: %s", reason, kind, ns, name, e.Message)
	}
}

// TestClaimDeletedWhileAttachedGivesUpAddress deletes the claim of an
// attached address under reclaimPolicy Delete. The address is torn down
// through the release sequence: MetalLB takes the IPs back from the
// Service, which is left with no pin, no release pin and no marker; the
// Events say the address was given up (no AddressConflict, no "stays
// reserved"); and a new claim gets the very same IPs, so nothing leaked.
func TestClaimDeletedWhileAttachedGivesUpAddress(t *testing.T) {
	tests := []struct {
		name   string
		family iadv1alpha1.IPFamily
		cidrs  []string
		svc    func(ns string) *corev1.Service
	}{
		{"dual-stack, shared handoff", iadv1alpha1.FamilyDual, []string{"203.0.113.200/32", "2001:db8:300::7/128"},
			func(ns string) *corev1.Service {
				return sharedLB(ns, "web", "web-ip", corev1.IPv4Protocol, corev1.IPv6Protocol)
			}},
		{"ipv4, gap handoff", iadv1alpha1.FamilyIPv4, []string{"203.0.113.201/32"},
			func(ns string) *corev1.Service { return lb(ns, "web", "web-ip") }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			startDriver(t)
			ns := []string{"giveup-dual", "giveup-v4"}[i]
			deleteClass(t, ns, tt.cidrs...)
			addrs := provisioned(t, ns, "web-ip", ns, tt.family)
			var ips []string
			for _, a := range addrs {
				ips = append(ips, a.Spec.Address)
			}
			pin := marks.PinValue(ips)
			suite.Create(t, tt.svc(ns))
			assertAssociated(t, ns, "web", "web-ip", pin, addrs...)

			cl := &iadv1alpha1.IPAddressClaim{}
			require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-ip"}, cl))
			require.NoError(t, c.Client.Delete(ctx, cl))

			assert.EventuallyWithT(t, func(t *assert.CollectT) {
				for _, a := range addrs {
					err := c.Client.Get(ctx, client.ObjectKeyFromObject(a), &iadv1alpha1.IPAddress{})
					assert.True(t, apierrors.IsNotFound(err), "%s is deleted: %v", a.Name, err)
				}
				s := suite.GetService(t, ns, "web")
				assert.Empty(t, fixture.Ingress(s), "MetalLB took the addresses back")
				for _, k := range []string{marks.KeyPin, marks.KeyPinnedBy, marks.KeySharing, marks.KeySharedBy} {
					assert.NotContains(t, s.Annotations, k, "nothing the driver wrote is left, least of all a release pin")
				}
			}, fixture.Timeout, fixture.Tick)
			assert.EventuallyWithT(t, func(t *assert.CollectT) {
				var found bool
				for _, e := range suite.Events(t, fixture.About{Kind: "Service", Namespace: ns, Name: "web"}, "") {
					found = found || (e.Type == corev1.EventTypeNormal && strings.Contains(e.Message, "given up") && strings.Contains(e.Message, "detached"))
				}
				assert.True(t, found, "an Event says the address was given up and the Service detached")
			}, fixture.Timeout, fixture.Tick)
			assertNoEvent(t, "Service", ns, "web", ReasonAddressConflict)
			assertNoEvent(t, "Service", ns, "web", ReasonDetached, "stays reserved")

			// The IPs went back to MetalLB: the next claim gets them.
			again := provisioned(t, ns, "again", ns, tt.family)
			var got []string
			for _, a := range again {
				got = append(got, a.Spec.Address)
			}
			assert.ElementsMatch(t, ips, got, "the pool holds only these IPs: they were freed")
		})
	}
}

// TestTwoServicesNamingOneClaimAtOnce creates two Services that name one
// claim at the same instant, both able to take the shared handoff (their
// ports differ, so MetalLB would let both share the address). Exactly one
// gets the claim; the other gets the rejection Event and is never pinned.
func TestTwoServicesNamingOneClaimAtOnce(t *testing.T) {
	startDriver(t)
	const ns = "race"
	class(t, ns, "203.0.113.208/30")
	addrs := provisioned(t, ns, "web-ip", ns, iadv1alpha1.FamilyIPv4)
	a := addrs[0]
	w := watchPins(t, ns)

	web := sharedLB(ns, "web", "web-ip")
	api := sharedLB(ns, "api", "web-ip")
	api.Spec.Ports[0].Port = 81
	var wg sync.WaitGroup
	for _, s := range []*corev1.Service{web, api} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, c.Client.Create(context.Background(), s))
		}()
	}
	wg.Wait()

	var winner, loser string
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		at := suite.GetAddress(t, a.Name).Status.AssociatedTo
		require.NotNil(t, at)
		winner, loser = at.Name, map[string]string{"web": "api", "api": "web"}[at.Name]
	}, fixture.Timeout, fixture.Tick)
	assertAssociated(t, ns, winner, "web-ip", a.Spec.Address, a)
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", ns, loser, corev1.EventTypeWarning, ReasonClaimAlreadyAssociated, "already attached to Service "+ns+"/"+winner)
	}, fixture.Timeout, fixture.Tick)
	s := suite.GetService(t, ns, loser)
	assert.NotContains(t, s.Annotations, marks.KeyPin)
	assert.NotContains(t, s.Annotations, marks.KeyPinnedBy)
	assert.Empty(t, fixture.Ingress(s))
	assert.False(t, w.wasPinned(loser), "the losing Service was never pinned")
	assert.True(t, w.wasPinned(winner))
	assertNoEvent(t, "Service", ns, loser, ReasonAssociated)
	assert.Equal(t, iadv1alpha1.AddressBound, suite.GetAddress(t, a.Name).Status.Phase, "no Conflict")

	// The winner lets the claim go: the Service that waited gets its
	// address. The last step of the winner's detach (the pin and the
	// marker go) changes only the winner, so that change must wake it.
	patchAnnotations(t, ns, winner, map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
	assertAssociated(t, ns, loser, "web-ip", a.Spec.Address, a)
}

// TestNoFinalizerOnTenantServices: an attached Service carries no driver
// finalizer, so its deletion never waits for the service controller;
// deleting the namespace of an attached Service completes and the address
// is detached.
func TestNoFinalizerOnTenantServices(t *testing.T) {
	ctx := context.Background()
	class(t, "sim-nofin", "198.51.100.224/28")
	_, addrs := boundClaim(t, "nofin", "ip", "sim-nofin", iadv1alpha1.FamilyIPv4, "198.51.100.225")
	suite.Create(t, lb("nofin", "web", "ip"))
	assertAssociated(t, "nofin", "web", "ip", "198.51.100.225", addrs...) // asserts no finalizer

	// Deleting the namespace completes; the association is cleared.
	require.NoError(t, c.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nofin"}}))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		err := c.Client.Get(ctx, client.ObjectKey{Name: "nofin"}, &corev1.Namespace{})
		assert.True(t, apierrors.IsNotFound(err), "the namespace is gone: %v", err)
		assert.Nil(t, suite.GetAddress(t, addrs[0].Name).Status.AssociatedTo)
	}, fixture.Timeout, fixture.Tick)
}
