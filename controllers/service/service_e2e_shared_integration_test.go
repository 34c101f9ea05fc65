//go:build integration

package service

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// The shared handoff, run end to end with the reference core, the claim
// controller, the IPAddress controller and the real MetalLB controller.

// holdWatch follows every change of every Service through a watch, and
// checks after each one that each watched IP is held: shown in
// status.loadBalancer.ingress by one of its address's placeholders or by
// one of the watched workloads. The watch delivers the changes in order,
// so every state the API server went through is checked, not a sample.
type holdWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	states int
	gaps   []string
	errs   []string
	// shared counts, per IP, the times it came to be held by a placeholder
	// and a workload at once: the proof that the two shared it.
	shared map[string]int
	both   map[string]bool
}

// watchHeld starts watching. ips maps each watched IP to its IPAddress name.
func watchHeld(t *testing.T, ips map[string]string, workloads ...client.ObjectKey) *holdWatch {
	t.Helper()
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Client.Scheme()})
	require.NoError(t, err)
	var list corev1.ServiceList
	require.NoError(t, wc.List(context.Background(), &list))
	state := map[client.ObjectKey]*corev1.Service{}
	for i := range list.Items {
		state[client.ObjectKeyFromObject(&list.Items[i])] = &list.Items[i]
	}
	isWorkload := map[client.ObjectKey]bool{}
	for _, k := range workloads {
		isWorkload[k] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &holdWatch{cancel: cancel, done: make(chan struct{}), shared: map[string]int{}, both: map[string]bool{}}
	w.check(state, ips, isWorkload, list.ResourceVersion)
	go func() {
		defer close(w.done)
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			watcher, err := wc.Watch(ctx, &corev1.ServiceList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err != nil {
				if ctx.Err() == nil {
					w.fail("watch: %v", err)
				}
				return
			}
			for ev := range watcher.ResultChan() {
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
					svc := ev.Object.(*corev1.Service)
					rv = svc.ResourceVersion
					if ev.Type == watch.Deleted {
						delete(state, client.ObjectKeyFromObject(svc))
					} else {
						state[client.ObjectKeyFromObject(svc)] = svc
					}
					w.check(state, ips, isWorkload, rv)
				case watch.Error:
					if ctx.Err() == nil {
						w.fail("watch error: %v", ev.Object)
					}
				}
			}
			watcher.Stop()
		}
	}()
	t.Cleanup(w.finish)
	return w
}

func (w *holdWatch) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, fmt.Sprintf(format, args...))
}

// check judges one state of the cluster's Services.
func (w *holdWatch) check(state map[client.ObjectKey]*corev1.Service, ips map[string]string, isWorkload map[client.ObjectKey]bool, rv string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.states++
	for ip, addr := range ips {
		byPlaceholder, byWorkload := false, false
		for key, s := range state {
			if !marks.Holds(s, ip) {
				continue
			}
			byPlaceholder = byPlaceholder || (s.Namespace == placeholderNS && s.Labels[names.LabelAddress] == addr)
			byWorkload = byWorkload || isWorkload[key]
		}
		if !byPlaceholder && !byWorkload {
			w.gaps = append(w.gaps, fmt.Sprintf("%s held by nobody at resourceVersion %s", ip, rv))
		}
		both := byPlaceholder && byWorkload
		if both && !w.both[ip] {
			w.shared[ip]++
		}
		w.both[ip] = both
	}
}

// unheldStates stops watching and returns how many states had a watched IP
// held by nobody.
func (w *holdWatch) unheldStates(t *testing.T) int {
	t.Helper()
	w.finish()
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Empty(t, w.errs, "the watch ran without errors")
	return len(w.gaps)
}

// finish stops watching; it may be called more than once.
func (w *holdWatch) finish() {
	w.cancel()
	<-w.done
}

// assertNeverUnheld stops watching and asserts that no state of the cluster
// had a watched IP held by nobody, and that each IP was shared by a
// placeholder and a workload at least handoffs times (once per shared
// handoff).
func (w *holdWatch) assertNeverUnheld(t *testing.T, handoffs int) {
	t.Helper()
	w.finish()
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Empty(t, w.errs, "the watch ran without errors")
	assert.Empty(t, w.gaps, "no state of the cluster has a watched IP held by nobody")
	for ip := range w.both {
		assert.GreaterOrEqual(t, w.shared[ip], handoffs, "%s was shared by a placeholder and the workload in each handoff", ip)
	}
	t.Logf("%d states checked, %d unheld, shared: %v", w.states, len(w.gaps), w.shared)
}

// provisioned creates a claim and waits until the driver and the core have
// bound it and a placeholder holds each of its addresses. It returns the
// addresses, sorted by name.
func provisioned(t *testing.T, ns, name, class string, family iadv1alpha1.IPFamily) []*iadv1alpha1.IPAddress {
	t.Helper()
	cl := createClaim(t, ns, name, class, family)
	var addrs []*iadv1alpha1.IPAddress
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		addrs = nil
		got := &iadv1alpha1.IPAddressClaim{}
		require.NoError(t, c.Client.Get(context.Background(), client.ObjectKeyFromObject(cl), got))
		require.Equal(t, iadv1alpha1.ClaimBound, got.Status.Phase)
		require.Len(t, got.Status.Addresses, len(family.Families()))
		for _, ca := range got.Status.Addresses {
			addrs = append(addrs, suite.GetAddress(t, ca.Name))
		}
	}, fixture.MetalLBTimeout, fixture.Tick, "claim %s/%s is bound", ns, name)
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].Name < addrs[j].Name })
	for _, a := range addrs {
		assertHeld(t, a.Name, a.Spec.Address)
	}
	return addrs
}

// assertReleasedForWorkload waits until the IPAddress controller has
// deleted the address's placeholders and reports the hold released.
func assertReleasedForWorkload(t *testing.T, addrs ...*iadv1alpha1.IPAddress) {
	t.Helper()
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		for _, a := range addrs {
			cond := meta.FindStatusCondition(suite.GetAddress(t, a.Name).Status.Conditions, conditions.Held)
			if assert.NotNil(t, cond) {
				assert.Equal(t, metav1.ConditionFalse, cond.Status)
				assert.Equal(t, conditions.ReasonReleasedForWorkload, cond.Reason)
			}
			assert.Empty(t, suite.PlaceholdersOf(t, a.Name), "no placeholder while attached")
		}
	}, fixture.Timeout, fixture.Tick)
}

// assertSharedThrough waits until each address, attached in a shared
// attachment, reports Held True (SharedWithWorkload) and exactly one
// placeholder, its hold, holds its IP beside the Service, and returns the
// holds' uids by address name: the placeholder stays for the whole
// attachment.
func assertSharedThrough(t *testing.T, addrs ...*iadv1alpha1.IPAddress) map[string]string {
	t.Helper()
	uids := map[string]string{}
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		for _, a := range addrs {
			got := suite.GetAddress(t, a.Name)
			assert.NotNil(t, got.Status.AssociatedTo, "attached")
			cond := meta.FindStatusCondition(got.Status.Conditions, conditions.Held)
			if assert.NotNil(t, cond) {
				assert.Equal(t, metav1.ConditionTrue, cond.Status)
				assert.Equal(t, conditions.ReasonSharedWithWorkload, cond.Reason)
			}
			phs := suite.PlaceholdersOf(t, a.Name)
			if assert.Len(t, phs, 1, "the hold placeholder stays while attached") {
				assert.Equal(t, []string{a.Spec.Address}, fixture.Ingress(&phs[0]), "the placeholder holds the address beside the Service")
				uids[a.Name] = string(phs[0].UID)
			}
		}
	}, fixture.MetalLBTimeout, fixture.Tick)
	return uids
}

// holdUIDs returns the uids of the addresses' placeholders, by address name.
func holdUIDs(t *testing.T, addrs ...*iadv1alpha1.IPAddress) map[string]string {
	t.Helper()
	uids := map[string]string{}
	for _, a := range addrs {
		phs := suite.PlaceholdersOf(t, a.Name)
		require.Len(t, phs, 1)
		uids[a.Name] = string(phs[0].UID)
	}
	return uids
}

// assertDetached waits until the Service carries nothing the driver wrote,
// holds nothing, and the addresses are unattached and Bound.
func assertDetached(t *testing.T, ns, name string, addrs ...*iadv1alpha1.IPAddress) {
	t.Helper()
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		s := suite.GetService(t, ns, name)
		for _, k := range []string{marks.KeyPin, marks.KeyPinnedBy, marks.KeySharedBy} {
			assert.NotContains(t, s.Annotations, k)
		}
		assert.NotContains(t, s.Finalizers, AssociationFinalizer)
		assert.Empty(t, fixture.Ingress(s), "MetalLB took the addresses back")
		for _, a := range addrs {
			got := suite.GetAddress(t, a.Name)
			assert.Nil(t, got.Status.AssociatedTo)
			assert.Equal(t, iadv1alpha1.AddressBound, got.Status.Phase)
		}
	}, fixture.MetalLBTimeout, fixture.Tick)
	for _, a := range addrs {
		assertHeld(t, a.Name, a.Spec.Address)
	}
}

func ipsOf(addrs []*iadv1alpha1.IPAddress) map[string]string {
	out := map[string]string{}
	for _, a := range addrs {
		out[a.Spec.Address] = a.Name
	}
	return out
}

func counter(direction, mode string) float64 {
	return testutil.ToFloat64(handoffsTotal.WithLabelValues(direction, mode))
}

// TestSharedHandoffNeverUnheld attaches a Service that can share its
// address with the placeholder, detaches it by removing the annotation,
// attaches another Service to the same address and deletes that one: the
// same hold placeholder holds the address throughout (attaching deletes
// nothing), and at no state of the cluster is the address held by nobody.
func TestSharedHandoffNeverUnheld(t *testing.T) {
	startDriver(t)
	class(t, "shared", "203.0.113.0/28")
	addrs := provisioned(t, "shared", "web-ip", "shared", iadv1alpha1.FamilyIPv4)
	a, ip := addrs[0], addrs[0].Spec.Address
	key := marks.Keys{}.Of(a)
	assert.NotContains(t, suite.PlaceholdersOf(t, a.Name)[0].Annotations, marks.KeySharing, "no key before a workload shares the address")

	attachShared, detachShared := counter(directionAttach, ModeShared), counter(directionDetach, ModeShared)
	attachGap, unheld := counter(directionAttach, ModeGap), histogram(t, handoffUnheldSeconds).GetSampleCount()
	w := watchHeld(t, ipsOf(addrs), client.ObjectKey{Namespace: "shared", Name: "web"}, client.ObjectKey{Namespace: "shared", Name: "api"})
	hold := holdUIDs(t, a)

	// Attach: the placeholder stays and shares the address.
	suite.Create(t, sharedLB("shared", "web", "web-ip"))
	assertAssociated(t, "shared", "web", "web-ip", ip, a)
	assert.Equal(t, hold, assertSharedThrough(t, a), "attaching deletes nothing")
	s := suite.GetService(t, "shared", "web")
	assert.Equal(t, key, s.Annotations[marks.KeySharing], "the Service shared the address under the claim's key")
	assert.Equal(t, key, suite.PlaceholdersOf(t, a.Name)[0].Annotations[marks.KeySharing], "the hold was given the key for the shared handoff")
	assert.Equal(t, "web-ip", s.Annotations[marks.KeySharedBy])
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", "shared", "web", corev1.EventTypeNormal, ReasonAssociated, `claim "web-ip"`, ip, "shared handoff", "never unheld")
		assertEvent(t, "IPAddress", "", a.Name, corev1.EventTypeNormal, ReasonAssociated, "Service shared/web", "shared handoff")
		assert.Equal(t, attachShared+1, counter(directionAttach, ModeShared))
	}, fixture.Timeout, fixture.Tick)

	// Detach by removing the annotation.
	patchAnnotations(t, "shared", "web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
	assertDetached(t, "shared", "web", a)
	assert.Equal(t, hold, holdUIDs(t, a), "the same placeholder held the address through the detach")
	assert.Equal(t, key, suite.PlaceholdersOf(t, a.Name)[0].Annotations[marks.KeySharing], "the hold keeps its key (taking it back would cost MetalLB a full pass)")
	assert.NotContains(t, suite.GetService(t, "shared", "web").Annotations, marks.KeySharing, "the key the driver wrote is withdrawn")
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", "shared", "web", corev1.EventTypeNormal, ReasonReleasing, ip, "shared handoff", "a placeholder holds the address")
		assertEvent(t, "Service", "shared", "web", corev1.EventTypeNormal, ReasonDetached, ip)
		assert.Equal(t, detachShared+1, counter(directionDetach, ModeShared))
	}, fixture.Timeout, fixture.Tick)
	assert.Equal(t, iadv1alpha1.AddressBound, suite.GetAddress(t, a.Name).Status.Phase, "no Conflict along the way")
	assert.Nil(t, meta.FindStatusCondition(suite.GetAddress(t, a.Name).Status.Conditions, conditions.Conflict), "never a Conflict")

	// Another Service gets the same address, the same way.
	suite.Create(t, sharedLB("shared", "api", "web-ip"))
	assertAssociated(t, "shared", "api", "web-ip", ip, a)
	assert.Equal(t, hold, assertSharedThrough(t, a))

	// Deleting the attached Service leaves the address held by the same
	// placeholder: no gap at all.
	require.NoError(t, c.Client.Delete(context.Background(), suite.GetService(t, "shared", "api")))
	assertHeld(t, a.Name, ip)
	assert.Equal(t, hold, holdUIDs(t, a), "the same placeholder held the address through the Service's deletion")
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		if cond := meta.FindStatusCondition(suite.GetAddress(t, a.Name).Status.Conditions, conditions.Held); assert.NotNil(t, cond) {
			assert.Equal(t, conditions.ReasonHeldByPlaceholder, cond.Reason)
		}
	}, fixture.Timeout, fixture.Tick)
	// Each attachment shared the address once: the placeholder and the
	// workload held it together from its attach until its detach.
	w.assertNeverUnheld(t, 2)

	assert.Equal(t, attachGap, counter(directionAttach, ModeGap), "no gap handoff")
	assert.Equal(t, unheld, histogram(t, handoffUnheldSeconds).GetSampleCount(), "no unheld gap observed")
	assert.Equal(t, attachShared+2, counter(directionAttach, ModeShared))
}

// TestSharedHandoffDualStack attaches a dual-stack Service to a Dual claim
// and detaches it: both addresses, held by two placeholders that carry the
// claim's one key, are never unheld.
func TestSharedHandoffDualStack(t *testing.T) {
	startDriver(t)
	class(t, "shared-dual", "203.0.113.16/28", "2001:db8:200::/124")
	addrs := provisioned(t, "shared-dual", "both", "shared-dual", iadv1alpha1.FamilyDual)
	require.Len(t, addrs, 2)
	key := marks.Keys{}.Of(addrs[0])
	for _, a := range addrs {
		assert.NotContains(t, suite.PlaceholdersOf(t, a.Name)[0].Annotations, marks.KeySharing, "no key before a workload shares the address")
	}
	var pin []string
	for _, a := range addrs {
		pin = append(pin, a.Spec.Address)
	}
	w := watchHeld(t, ipsOf(addrs), client.ObjectKey{Namespace: "shared-dual", Name: "web"})

	hold := holdUIDs(t, addrs...)
	suite.Create(t, sharedLB("shared-dual", "web", "both", corev1.IPv4Protocol, corev1.IPv6Protocol))
	assertAssociated(t, "shared-dual", "web", "both", marks.PinValue(pin), addrs...)
	assert.Equal(t, hold, assertSharedThrough(t, addrs...), "attaching deletes neither placeholder")
	assert.Equal(t, key, suite.GetService(t, "shared-dual", "web").Annotations[marks.KeySharing])
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", "shared-dual", "web", corev1.EventTypeNormal, ReasonAssociated, marks.PinValue(pin), "shared handoff")
	}, fixture.Timeout, fixture.Tick)

	patchAnnotations(t, "shared-dual", "web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
	assertDetached(t, "shared-dual", "web", addrs...)
	assert.Equal(t, hold, holdUIDs(t, addrs...), "the same placeholders held both addresses through the detach")
	w.assertNeverUnheld(t, 1)
}

// TestUnshareableServicesTakeTheGapHandoff: a Service MetalLB would not let
// share an address with a placeholder (it serves the placeholder's port,
// its traffic policy is Local, or it carries its own sharing key) is
// attached and detached with the gap handoff, and works all the same; a
// hand-written sharing key is never touched.
func TestUnshareableServicesTakeTheGapHandoff(t *testing.T) {
	startDriver(t)
	class(t, "gapfb", "203.0.113.32/28")
	byPort := provisioned(t, "gapfb", "port", "gapfb", iadv1alpha1.FamilyIPv4)
	byPolicy := provisioned(t, "gapfb", "policy", "gapfb", iadv1alpha1.FamilyIPv4)
	byKey := provisioned(t, "gapfb", "key", "gapfb", iadv1alpha1.FamilyIPv4)
	attachGap := counter(directionAttach, ModeGap)
	// The watch that sees no gap in a shared handoff sees this one's.
	w := watchHeld(t, ipsOf(byPort), client.ObjectKey{Namespace: "gapfb", Name: "discard"})

	local := sharedLB("gapfb", "local", "policy")
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	keyed := sharedLB("gapfb", "keyed", "key")
	keyed.Annotations[marks.KeySharing] = "team-a"
	suite.Create(t, lb("gapfb", "discard", "port"))
	suite.Create(t, local)
	suite.Create(t, keyed)

	for _, tc := range []struct {
		svc, claim string
		addr       *iadv1alpha1.IPAddress
		because    string
	}{
		{"discard", "port", byPort[0], "the Service uses port 9/TCP"},
		{"local", "policy", byPolicy[0], "externalTrafficPolicy is Local"},
		{"keyed", "key", byKey[0], `carries its own metallb.io/allow-shared-ip ("team-a")`},
	} {
		assertAssociated(t, "gapfb", tc.svc, tc.claim, tc.addr.Spec.Address, tc.addr)
		assertReleasedForWorkload(t, tc.addr)
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			assertEvent(t, "Service", "gapfb", tc.svc, corev1.EventTypeNormal, ReasonAssociated, tc.addr.Spec.Address, "gap handoff", tc.because)
			assertEvent(t, "IPAddress", "", tc.addr.Name, corev1.EventTypeNormal, ReasonAssociated, "Service gapfb/"+tc.svc, "gap handoff")
		}, fixture.Timeout, fixture.Tick)
		s := suite.GetService(t, "gapfb", tc.svc)
		assert.NotContains(t, s.Annotations, marks.KeySharedBy, tc.svc)
	}
	assert.NotContains(t, suite.GetService(t, "gapfb", "discard").Annotations, marks.KeySharing)
	assert.Equal(t, "team-a", suite.GetService(t, "gapfb", "keyed").Annotations[marks.KeySharing], "the hand-written key stays")
	assert.Equal(t, attachGap+3, counter(directionAttach, ModeGap))
	assert.Positive(t, w.unheldStates(t), "the gap handoff leaves the address unheld for a moment, and the watch sees it")

	for _, tc := range []struct {
		svc  string
		addr *iadv1alpha1.IPAddress
	}{{"discard", byPort[0]}, {"local", byPolicy[0]}, {"keyed", byKey[0]}} {
		patchAnnotations(t, "gapfb", tc.svc, map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
		assertDetached(t, "gapfb", tc.svc, tc.addr)
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			var msgs []string
			for _, e := range suite.Events(t, fixture.About{Kind: "Service", Namespace: "gapfb", Name: tc.svc}, "") {
				if e.Reason == ReasonReleasing {
					msgs = append(msgs, e.Message)
				}
			}
			if assert.NotEmpty(t, msgs, "the release pin is used") {
				assert.NotContains(t, strings.Join(msgs, "\n"), "shared handoff")
			}
		}, fixture.Timeout, fixture.Tick)
	}
	assert.Equal(t, "team-a", suite.GetService(t, "gapfb", "keyed").Annotations[marks.KeySharing], "the hand-written key stays after the detach")
}
