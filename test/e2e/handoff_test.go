package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/parking"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// The handoffs without the parking pool, as the chart runs the driver with
// parking.enabled false: a Service that can share its address with the
// address's placeholder is attached and detached with the shared handoff,
// the address never held by nobody; one that cannot, with the gap handoff.
// Each story removes the parking pool for its duration and puts it back
// after. The class controller renders the pools, with the grant selector, so
// a detach withdraws the pin and the grant label in one write. They read the service controller's handoff metrics from its
// processes, so they run on the local provider.

// metallbWait bounds a wait on MetalLB: it allows for the backoff of a
// failed full pass (tens of seconds).
const metallbWait = 2 * time.Minute

// What the service controller says: Event reasons, and the labels of its
// metallb_iad_handoffs_total.
const (
	reasonAssociated = "Associated"
	reasonDetached   = "Detached"

	dirAttach  = "attach"
	dirDetach  = "detach"
	modeShared = "shared"
	modeGap    = "gap"
)

// associationFinalizer is the finalizer the driver never puts on a
// tenant's Service.
const associationFinalizer = names.Domain + "association"

// needLocal skips a feature that reads the driver's processes on this
// machine.
func needLocal(t *testing.T) {
	t.Helper()
	if local == nil {
		t.Skip("reads the service controller's metrics from its processes: the local provider (E2E_PROVIDER unset)")
	}
}

// withoutParking deletes the parking pool until the test ends, then
// creates it again as it was. The driver reads the pool from its cache: the
// stories provision a claim (the core, the claim controller, the IPAddress
// controller and MetalLB in turn) before their first attach, long after
// the deletion reached the controllers.
func (k *kit) withoutParking() {
	k.t.Helper()
	key := client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: parking.DefaultPool}
	pool := &metallbv1beta1.IPAddressPool{}
	err := k.k.Get(k.ctx, key, pool)
	if apierrors.IsNotFound(err) {
		return
	}
	require.NoError(k.t, err)
	saved := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: pool.Namespace, Name: pool.Name, Labels: pool.Labels, Annotations: pool.Annotations},
		Spec:       pool.Spec,
	}
	require.NoError(k.t, k.k.Delete(k.ctx, pool))
	k.t.Cleanup(func() {
		ctx := context.Background()
		require.Eventually(k.t, func() bool {
			return apierrors.IsNotFound(k.k.Get(ctx, key, &metallbv1beta1.IPAddressPool{}))
		}, wait, tick, "the parking pool is gone before it is put back")
		require.NoError(k.t, k.k.Create(ctx, saved), "put the parking pool back")
	})
	require.Eventually(k.t, func() bool {
		return apierrors.IsNotFound(k.k.Get(k.ctx, key, &metallbv1beta1.IPAddressPool{}))
	}, wait, tick, "the parking pool is gone")
}

// serviceMetric sums a series of the service controller's /metrics over
// its live processes: the leader counts, a standby's series stay at zero.
func serviceMetric(t require.TestingT, series string) float64 {
	var sum float64
	for _, d := range local.Replicas("service") {
		resp, err := http.Get("http://" + d.MetricsAddr + "/metrics")
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			name, value, ok := strings.Cut(line, " ")
			if !ok || name != series {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			require.NoError(t, err, "%s", line)
			sum += v
		}
	}
	return sum
}

// counter is metallb_iad_handoffs_total of a direction and mode.
func counter(t require.TestingT, direction, mode string) float64 {
	return serviceMetric(t, fmt.Sprintf(`metallb_iad_handoffs_total{direction=%q,mode=%q}`, direction, mode))
}

// unheldObserved is how many unheld gaps metallb_iad_handoff_unheld_seconds
// observed.
func unheldObserved(t require.TestingT) float64 {
	return serviceMetric(t, "metallb_iad_handoff_unheld_seconds_count")
}

// lb is a LoadBalancer Service asking for claim. It serves port 9/TCP, the
// placeholder's port, so MetalLB cannot let it share an address with a
// placeholder and the driver attaches it with the gap handoff. sharedLB is
// the one that can share.
func lb(ns, name, claim string, fams ...corev1.IPFamily) *corev1.Service {
	s := sharedLB(ns, name, claim, fams...)
	s.Spec.Ports = []corev1.ServicePort{{Name: "discard", Port: 9, TargetPort: intstr.FromInt32(9), Protocol: corev1.ProtocolTCP}}
	return s
}

// sharedLB is a LoadBalancer Service (cluster.LoadBalancer) of the IP
// families (IPv4 when none; two ask for RequireDualStack) serving port
// 80/TCP with the default traffic policy (Cluster): MetalLB lets it share
// an address with a placeholder, so the driver attaches it with the shared
// handoff.
func sharedLB(ns, name, claim string, fams ...corev1.IPFamily) *corev1.Service {
	s := cluster.LoadBalancer(ns, name, map[string]string{})
	if claim != "" {
		s.Annotations[iadv1alpha1.ServiceClaimAnnotation] = claim
	}
	if len(fams) > 0 {
		s.Spec.IPFamilies = fams
	}
	if len(fams) == 2 {
		s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	}
	return s
}

func (k *kit) create(obj client.Object) {
	k.t.Helper()
	require.NoError(k.t, k.k.Create(k.ctx, obj), "create %T %s", obj, obj.GetName())
}

// readAddress reads an IPAddress from the API server.
func (k *kit) readAddress(t require.TestingT, name string) *iadv1alpha1.IPAddress {
	a := &iadv1alpha1.IPAddress{}
	require.NoError(t, k.k.Get(k.ctx, client.ObjectKey{Name: name}, a))
	return a
}

// readService reads a Service of the kit's namespace from the API server.
func (k *kit) readService(t require.TestingT, name string) *corev1.Service {
	s := &corev1.Service{}
	require.NoError(t, k.k.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: name}, s))
	return s
}

// placeholdersOf lists the Services of the placeholder namespace labelled
// with the address name.
func (k *kit) placeholdersOf(t require.TestingT, address string) []corev1.Service {
	list := &corev1.ServiceList{}
	require.NoError(t, k.k.List(k.ctx, list, client.InNamespace(k.fleet.placeholderNamespace()),
		client.MatchingLabels{marks.LabelAddress: address}))
	return list.Items
}

// patchAnnotations merges annotations into a Service of the kit's
// namespace as its owner would (a value of "" removes the key).
func (k *kit) patchAnnotations(name string, ann map[string]string) {
	k.t.Helper()
	s := k.readService(k.t, name)
	orig := s.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	for key, v := range ann {
		if v == "" {
			delete(s.Annotations, key)
		} else {
			s.Annotations[key] = v
		}
	}
	require.NoError(k.t, k.k.Patch(k.ctx, s, client.MergeFrom(orig)))
}

// eventsAbout lists the Events about the object kind ns/name (a
// cluster-scoped object's are in "default").
func (k *kit) eventsAbout(t require.TestingT, kind, ns, name string) []corev1.Event {
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	list := &corev1.EventList{}
	require.NoError(t, k.k.List(k.ctx, list, client.InNamespace(ns),
		client.MatchingFields{"involvedObject.kind": kind, "involvedObject.name": name}))
	return list.Items
}

// assertEvent asserts an Event of the type and reason about the object
// whose message contains every one of parts.
func (k *kit) assertEvent(t *assert.CollectT, kind, ns, name, typ, reason string, parts ...string) {
	fixture.AssertEvent(t, k.eventsAbout(t, kind, ns, name), kind+" "+ns+"/"+name, typ, reason, parts...)
}

// assertAssociated waits for the whole forward handoff: associatedTo on
// every address, the pin and marker on the Service (and no finalizer), and
// MetalLB giving the Service exactly the pinned addresses.
func (k *kit) assertAssociated(svc, claim, pin string, addrs ...*iadv1alpha1.IPAddress) {
	k.t.Helper()
	assert.EventuallyWithT(k.t, func(t *assert.CollectT) {
		for _, a := range addrs {
			got := k.readAddress(t, a.Name)
			assert.Equal(t, &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: k.ns, Name: svc}, got.Status.AssociatedTo, a.Name)
		}
		s := k.readService(t, svc)
		assert.Equal(t, pin, s.Annotations[marks.KeyPin])
		assert.Equal(t, claim, s.Annotations[marks.KeyPinnedBy])
		assert.Empty(t, s.Finalizers, "no driver finalizer on a tenant's Service")
		// MetalLB may list them in another order (it sorts them as text).
		assert.ElementsMatch(t, strings.Split(pin, ","), ingress(s), "MetalLB gives the Service exactly the pinned addresses")
	}, metallbWait, tick)
}

// assertHeld waits until the address is unattached, reports Held True, and
// a placeholder in the placeholder namespace holds exactly its IP.
func (k *kit) assertHeld(address, ip string) {
	k.t.Helper()
	assert.EventuallyWithT(k.t, func(t *assert.CollectT) {
		a := k.readAddress(t, address)
		assert.Nil(t, a.Status.AssociatedTo)
		assert.True(t, conditions.IsTrue(a.Status.Conditions, conditions.Held), "Held")
		held := false
		for _, ph := range k.placeholdersOf(t, address) {
			held = held || (len(ingress(&ph)) == 1 && ingress(&ph)[0] == ip)
		}
		assert.True(t, held, "a placeholder holds %s", ip)
	}, metallbWait, tick)
}

// provisioned creates a claim in the kit's namespace and waits until the
// driver and the core have bound it and a placeholder holds each of its
// addresses. It returns the addresses, sorted by name.
func (k *kit) provisioned(name, class string, family iadv1alpha1.IPFamily) []*iadv1alpha1.IPAddress {
	k.t.Helper()
	cl := k.claim(name, class, family)
	var addrs []*iadv1alpha1.IPAddress
	require.EventuallyWithT(k.t, func(t *assert.CollectT) {
		addrs = nil
		got := &iadv1alpha1.IPAddressClaim{}
		require.NoError(t, k.k.Get(k.ctx, client.ObjectKeyFromObject(cl), got))
		require.Equal(t, iadv1alpha1.ClaimBound, got.Status.Phase)
		require.Len(t, got.Status.Addresses, len(family.Families()))
		for _, ca := range got.Status.Addresses {
			addrs = append(addrs, k.readAddress(t, ca.Name))
		}
	}, metallbWait, tick, "claim %s/%s is bound", k.ns, name)
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].Name < addrs[j].Name })
	for _, a := range addrs {
		k.assertHeld(a.Name, a.Spec.Address)
	}
	return addrs
}

// assertReleasedForWorkload waits until the IPAddress controller has
// deleted the address's placeholders and reports the hold released.
func (k *kit) assertReleasedForWorkload(addrs ...*iadv1alpha1.IPAddress) {
	k.t.Helper()
	assert.EventuallyWithT(k.t, func(t *assert.CollectT) {
		for _, a := range addrs {
			cond := meta.FindStatusCondition(k.readAddress(t, a.Name).Status.Conditions, conditions.Held)
			if assert.NotNil(t, cond) {
				assert.Equal(t, metav1.ConditionFalse, cond.Status)
				assert.Equal(t, conditions.ReasonReleasedForWorkload, cond.Reason)
			}
			assert.Empty(t, k.placeholdersOf(t, a.Name), "no placeholder while attached")
		}
	}, wait, tick)
}

// assertSharedThrough waits until each address, attached in a shared
// attachment, reports Held True (SharedWithWorkload) and exactly one
// placeholder, its hold, holds its IP beside the Service, and returns the
// holds' uids by address name: the placeholder stays for the whole
// attachment.
func (k *kit) assertSharedThrough(addrs ...*iadv1alpha1.IPAddress) map[string]string {
	k.t.Helper()
	uids := map[string]string{}
	assert.EventuallyWithT(k.t, func(t *assert.CollectT) {
		for _, a := range addrs {
			got := k.readAddress(t, a.Name)
			assert.NotNil(t, got.Status.AssociatedTo, "attached")
			cond := meta.FindStatusCondition(got.Status.Conditions, conditions.Held)
			if assert.NotNil(t, cond) {
				assert.Equal(t, metav1.ConditionTrue, cond.Status)
				assert.Equal(t, conditions.ReasonSharedWithWorkload, cond.Reason)
			}
			phs := k.placeholdersOf(t, a.Name)
			if assert.Len(t, phs, 1, "the hold placeholder stays while attached") {
				assert.Equal(t, []string{a.Spec.Address}, ingress(&phs[0]), "the placeholder holds the address beside the Service")
				uids[a.Name] = string(phs[0].UID)
			}
		}
	}, metallbWait, tick)
	return uids
}

// holdUIDs returns the uids of the addresses' placeholders, by address name.
func (k *kit) holdUIDs(addrs ...*iadv1alpha1.IPAddress) map[string]string {
	k.t.Helper()
	uids := map[string]string{}
	for _, a := range addrs {
		phs := k.placeholdersOf(k.t, a.Name)
		require.Len(k.t, phs, 1)
		uids[a.Name] = string(phs[0].UID)
	}
	return uids
}

// assertDetached waits until the Service carries nothing the driver wrote,
// holds nothing, and the addresses are unattached and Bound.
func (k *kit) assertDetached(name string, addrs ...*iadv1alpha1.IPAddress) {
	k.t.Helper()
	assert.EventuallyWithT(k.t, func(t *assert.CollectT) {
		s := k.readService(t, name)
		for _, key := range []string{marks.KeyPin, marks.KeyPinnedBy, marks.KeySharedBy} {
			assert.NotContains(t, s.Annotations, key)
		}
		assert.NotContains(t, s.Finalizers, associationFinalizer)
		assert.Empty(t, ingress(s), "MetalLB took the addresses back")
		for _, a := range addrs {
			got := k.readAddress(t, a.Name)
			assert.Nil(t, got.Status.AssociatedTo)
			assert.Equal(t, iadv1alpha1.AddressBound, got.Status.Phase)
		}
	}, metallbWait, tick)
	for _, a := range addrs {
		k.assertHeld(a.Name, a.Spec.Address)
	}
}

// sharingKey is the sharing key the driver gives every holder of the
// address (sharingkey.Keys.Of), under the sharing secret the controllers read
// from their Secret.
func (k *kit) sharingKey(a *iadv1alpha1.IPAddress) string {
	k.t.Helper()
	secret, err := sharingkey.Ensure(k.ctx, k.k, client.ObjectKey{Namespace: cluster.DriverNamespace, Name: cluster.SharingKeySecret}, false)
	require.NoError(k.t, err, "read the sharing-key Secret")
	return sharingkey.NewKeys(secret).Of(a)
}

func ipsOf(addrs []*iadv1alpha1.IPAddress) map[string]string {
	out := map[string]string{}
	for _, a := range addrs {
		out[a.Spec.Address] = a.Name
	}
	return out
}

// watchHeld starts a fixture.HoldWatch on the fleet's placeholder namespace.
func (k *kit) watchHeld(cfg *envconf.Config, ips map[string]string, workloads ...client.ObjectKey) *fixture.HoldWatch {
	k.t.Helper()
	wc, err := client.NewWithWatch(cfg.Client().RESTConfig(), client.Options{Scheme: bootstrap.Scheme()})
	require.NoError(k.t, err)
	return fixture.WatchHeld(k.t, wc, k.fleet.placeholderNamespace(), ips, workloads...)
}

// TestGapHandoff: a claim is provisioned and held by a placeholder;
// annotating a Service that cannot share the address with the placeholder
// (the gap handoff) moves the address to it; removing the annotation brings
// the hold back; another Service then gets the same address; deleting it
// brings the hold back.
func TestGapHandoff(t *testing.T) {
	needLocal(t)
	story(t, "gap-handoff", "an unshareable Service takes the address from its hold and gives it back", "handoff-gap", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.withoutParking()
		k.class("e2e-handoff-gap", iadv1alpha1.ReclaimDelete, "198.51.100.240/30")
		cl := k.claim("web-ip", "e2e-handoff-gap", iadv1alpha1.FamilyIPv4)

		// Provisioned, bound and held.
		var addr *iadv1alpha1.IPAddress
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			got := &iadv1alpha1.IPAddressClaim{}
			require.NoError(t, k.k.Get(ctx, client.ObjectKeyFromObject(cl), got))
			require.Equal(t, iadv1alpha1.ClaimBound, got.Status.Phase)
			require.Len(t, got.Status.Addresses, 1)
			addr = k.readAddress(t, got.Status.Addresses[0].Name)
			assert.Equal(t, iadv1alpha1.AddressBound, addr.Status.Phase)
			assert.True(t, conditions.IsTrue(addr.Status.Conditions, conditions.Held), "held by a placeholder")
		}, metallbWait, tick)
		require.NotNil(t, addr)
		ip := addr.Spec.Address
		k.assertHeld(addr.Name, ip)

		// Attach.
		k.create(lb(k.ns, "web", "web-ip"))
		k.assertAssociated("web", "web-ip", ip, addr)
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			a := k.readAddress(t, addr.Name)
			cond := meta.FindStatusCondition(a.Status.Conditions, conditions.Held)
			if assert.NotNil(t, cond) {
				assert.Equal(t, metav1.ConditionFalse, cond.Status)
				assert.Equal(t, conditions.ReasonReleasedForWorkload, cond.Reason)
			}
			assert.Empty(t, k.placeholdersOf(t, addr.Name), "no placeholder while attached")
			assert.Equal(t, iadv1alpha1.AddressBound, a.Status.Phase)
		}, wait, tick)

		// Detach by removing the annotation: the hold comes back on the same IP.
		k.patchAnnotations("web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			s := k.readService(t, "web")
			assert.Empty(t, ingress(s))
			assert.NotContains(t, s.Annotations, marks.KeyPin)
			a := k.readAddress(t, addr.Name)
			assert.Nil(t, a.Status.AssociatedTo)
			assert.Equal(t, iadv1alpha1.AddressBound, a.Status.Phase)
		}, metallbWait, tick)
		k.assertHeld(addr.Name, ip)

		// Another Service gets the same address.
		k.create(lb(k.ns, "api", "web-ip"))
		k.assertAssociated("api", "web-ip", ip, addr)

		// Deleting it brings the hold back.
		k.deleteService("api")
		k.assertHeld(addr.Name, ip)
		assert.Equal(t, iadv1alpha1.AddressBound, k.readAddress(t, addr.Name).Status.Phase)
	})
}

// TestSharedHandoffNeverUnheld attaches a Service that can share its
// address with the placeholder, detaches it by removing the annotation,
// attaches another Service to the same address and deletes that one: the
// same hold placeholder holds the address throughout (attaching deletes
// nothing), and at no state of the cluster is the address held by nobody.
func TestSharedHandoffNeverUnheld(t *testing.T) {
	needLocal(t)
	story(t, "shared-handoff", "a shareable Service shares the address with its hold, never unheld", "shared", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.withoutParking()
		k.class("e2e-shared", "", "203.0.113.160/28")
		addrs := k.provisioned("web-ip", "e2e-shared", iadv1alpha1.FamilyIPv4)
		a, ip := addrs[0], addrs[0].Spec.Address
		key := k.sharingKey(a)
		assert.NotContains(t, k.placeholdersOf(t, a.Name)[0].Annotations, marks.KeySharing, "no key before a workload shares the address")

		attachShared, detachShared := counter(t, dirAttach, modeShared), counter(t, dirDetach, modeShared)
		attachGap, unheld := counter(t, dirAttach, modeGap), unheldObserved(t)
		w := k.watchHeld(cfg, ipsOf(addrs), client.ObjectKey{Namespace: k.ns, Name: "web"}, client.ObjectKey{Namespace: k.ns, Name: "api"})
		hold := k.holdUIDs(a)

		// Attach: the placeholder stays and shares the address.
		k.create(sharedLB(k.ns, "web", "web-ip"))
		k.assertAssociated("web", "web-ip", ip, a)
		assert.Equal(t, hold, k.assertSharedThrough(a), "attaching deletes nothing")
		s := k.readService(t, "web")
		assert.Equal(t, key, s.Annotations[marks.KeySharing], "the Service shared the address under the claim's key")
		assert.Equal(t, key, k.placeholdersOf(t, a.Name)[0].Annotations[marks.KeySharing], "the hold was given the key for the shared handoff")
		assert.Equal(t, "web-ip", s.Annotations[marks.KeySharedBy])
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			k.assertEvent(t, "Service", k.ns, "web", corev1.EventTypeNormal, reasonAssociated, `claim "web-ip"`, ip, "shared handoff", "never unheld")
			assert.Equal(t, attachShared+1, counter(t, dirAttach, modeShared))
		}, wait, tick)

		// Detach by removing the annotation.
		k.patchAnnotations("web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
		k.assertDetached("web", a)
		assert.Equal(t, hold, k.holdUIDs(a), "the same placeholder held the address through the detach")
		assert.Equal(t, key, k.placeholdersOf(t, a.Name)[0].Annotations[marks.KeySharing], "the hold keeps its key (taking it back would cost MetalLB a full pass)")
		assert.NotContains(t, k.readService(t, "web").Annotations, marks.KeySharing, "the key the driver wrote is withdrawn")
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			k.assertEvent(t, "Service", k.ns, "web", corev1.EventTypeNormal, reasonDetached, ip, "shared handoff", "a placeholder kept holding the address")
			assert.Equal(t, detachShared+1, counter(t, dirDetach, modeShared))
		}, wait, tick)
		assert.Equal(t, iadv1alpha1.AddressBound, k.readAddress(t, a.Name).Status.Phase, "no Conflict along the way")
		assert.Nil(t, meta.FindStatusCondition(k.readAddress(t, a.Name).Status.Conditions, conditions.Conflict), "never a Conflict")

		// Another Service gets the same address, the same way.
		k.create(sharedLB(k.ns, "api", "web-ip"))
		k.assertAssociated("api", "web-ip", ip, a)
		assert.Equal(t, hold, k.assertSharedThrough(a))

		// Deleting the attached Service leaves the address held by the same
		// placeholder: no gap at all.
		require.NoError(t, k.k.Delete(ctx, k.readService(t, "api")))
		k.assertHeld(a.Name, ip)
		assert.Equal(t, hold, k.holdUIDs(a), "the same placeholder held the address through the Service's deletion")
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			if cond := meta.FindStatusCondition(k.readAddress(t, a.Name).Status.Conditions, conditions.Held); assert.NotNil(t, cond) {
				assert.Equal(t, conditions.ReasonHeldByPlaceholder, cond.Reason)
			}
		}, wait, tick)
		// Each attachment shared the address once: the placeholder and the
		// workload held it together from its attach until its detach.
		w.AssertNeverUnheld(t, 2)

		assert.Equal(t, attachGap, counter(t, dirAttach, modeGap), "no gap handoff")
		assert.Equal(t, unheld, unheldObserved(t), "no unheld gap observed")
		assert.Equal(t, attachShared+2, counter(t, dirAttach, modeShared))
	})
}

// TestSharedHandoffDualStack attaches a dual-stack Service to a Dual claim
// and detaches it: both addresses, held by two placeholders that carry the
// claim's one key, are never unheld.
func TestSharedHandoffDualStack(t *testing.T) {
	needLocal(t)
	story(t, "shared-handoff-dual", "a dual-stack Service shares both addresses, never unheld", "shared-dual", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.withoutParking()
		k.class("e2e-shared-dual", "", "203.0.113.176/28", "2001:db8:200::/124")
		addrs := k.provisioned("both", "e2e-shared-dual", iadv1alpha1.FamilyDual)
		require.Len(t, addrs, 2)
		key := k.sharingKey(addrs[0])
		for _, a := range addrs {
			assert.NotContains(t, k.placeholdersOf(t, a.Name)[0].Annotations, marks.KeySharing, "no key before a workload shares the address")
		}
		var pin []string
		for _, a := range addrs {
			pin = append(pin, a.Spec.Address)
		}
		w := k.watchHeld(cfg, ipsOf(addrs), client.ObjectKey{Namespace: k.ns, Name: "web"})

		hold := k.holdUIDs(addrs...)
		k.create(sharedLB(k.ns, "web", "both", corev1.IPv4Protocol, corev1.IPv6Protocol))
		k.assertAssociated("web", "both", marks.PinValue(pin), addrs...)
		assert.Equal(t, hold, k.assertSharedThrough(addrs...), "attaching deletes neither placeholder")
		assert.Equal(t, key, k.readService(t, "web").Annotations[marks.KeySharing])
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			k.assertEvent(t, "Service", k.ns, "web", corev1.EventTypeNormal, reasonAssociated, marks.PinValue(pin), "shared handoff")
		}, wait, tick)

		k.patchAnnotations("web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
		k.assertDetached("web", addrs...)
		assert.Equal(t, hold, k.holdUIDs(addrs...), "the same placeholders held both addresses through the detach")
		w.AssertNeverUnheld(t, 1)
	})
}

// TestUnshareableServicesTakeTheGapHandoff: a Service MetalLB would not let
// share an address with a placeholder (it serves the placeholder's port,
// its traffic policy is Local, or it carries its own sharing key) is
// attached and detached with the gap handoff, and works all the same; a
// hand-written sharing key is never touched.
func TestUnshareableServicesTakeTheGapHandoff(t *testing.T) {
	needLocal(t)
	story(t, "unshareable-gap-handoff", "Services that cannot share take the gap handoff; a hand-written key stays", "gapfb", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.withoutParking()
		k.class("e2e-gapfb", "", "203.0.113.192/28")
		byPort := k.provisioned("port", "e2e-gapfb", iadv1alpha1.FamilyIPv4)
		byPolicy := k.provisioned("policy", "e2e-gapfb", iadv1alpha1.FamilyIPv4)
		byKey := k.provisioned("key", "e2e-gapfb", iadv1alpha1.FamilyIPv4)
		attachGap := counter(t, dirAttach, modeGap)
		// The watch that sees no gap in a shared handoff sees this one's.
		w := k.watchHeld(cfg, ipsOf(byPort), client.ObjectKey{Namespace: k.ns, Name: "discard"})

		localPolicy := sharedLB(k.ns, "local", "policy")
		localPolicy.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		keyed := sharedLB(k.ns, "keyed", "key")
		keyed.Annotations[marks.KeySharing] = "team-a"
		k.create(lb(k.ns, "discard", "port"))
		k.create(localPolicy)
		k.create(keyed)

		for _, tc := range []struct {
			svc, claim string
			addr       *iadv1alpha1.IPAddress
			because    string
		}{
			{"discard", "port", byPort[0], "the Service uses port 9/TCP"},
			{"local", "policy", byPolicy[0], "externalTrafficPolicy is Local"},
			{"keyed", "key", byKey[0], `carries its own metallb.io/allow-shared-ip ("team-a")`},
		} {
			k.assertAssociated(tc.svc, tc.claim, tc.addr.Spec.Address, tc.addr)
			k.assertReleasedForWorkload(tc.addr)
			assert.EventuallyWithT(t, func(t *assert.CollectT) {
				k.assertEvent(t, "Service", k.ns, tc.svc, corev1.EventTypeNormal, reasonAssociated, tc.addr.Spec.Address, "gap handoff", tc.because)
			}, wait, tick)
			s := k.readService(t, tc.svc)
			assert.NotContains(t, s.Annotations, marks.KeySharedBy, tc.svc)
		}
		assert.NotContains(t, k.readService(t, "discard").Annotations, marks.KeySharing)
		assert.Equal(t, "team-a", k.readService(t, "keyed").Annotations[marks.KeySharing], "the hand-written key stays")
		assert.Equal(t, attachGap+3, counter(t, dirAttach, modeGap))
		assert.Positive(t, w.UnheldStates(t), "the gap handoff leaves the address unheld for a moment, and the watch sees it")

		for _, tc := range []struct {
			svc  string
			addr *iadv1alpha1.IPAddress
		}{{"discard", byPort[0]}, {"local", byPolicy[0]}, {"keyed", byKey[0]}} {
			k.patchAnnotations(tc.svc, map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
			k.assertDetached(tc.svc, tc.addr)
			assert.EventuallyWithT(t, func(t *assert.CollectT) {
				var msgs []string
				for _, e := range k.eventsAbout(t, "Service", k.ns, tc.svc) {
					if e.Reason == reasonDetached {
						msgs = append(msgs, e.Message)
					}
				}
				if assert.NotEmpty(t, msgs, "the detach is told") {
					assert.NotContains(t, strings.Join(msgs, "\n"), "shared handoff")
				}
			}, wait, tick)
		}
		assert.Equal(t, "team-a", k.readService(t, "keyed").Annotations[marks.KeySharing], "the hand-written key stays after the detach")
	})
}
