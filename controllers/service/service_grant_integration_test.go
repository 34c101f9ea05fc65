//go:build integration

package service

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	classctl "github.com/cozystack/metallb-iad/controllers/class"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// startClassController runs the class controller for the rest of the test,
// as its own ServiceAccount.
func startClassController(t *testing.T) {
	t.Helper()
	suite.StartController(t, classctl.Controller)
}

// servedClass creates a class of the driver with the given addresses.
func servedClass(t *testing.T, name string, addresses ...string) {
	t.Helper()
	suite.Create(t, cluster.Class(name, iadv1alpha1.ReclaimDelete, fixture.Addresses(addresses...)))
}

func getPool(t require.TestingT, cls string) *metallbv1beta1.IPAddressPool {
	p := &metallbv1beta1.IPAddressPool{}
	require.NoError(t, c.Client.Get(context.Background(), client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: names.PoolName(cls)}, p))
	return p
}

// tenantClient is a client acting as a user who may write Services in ns
// and nothing else of the driver's.
func tenantClient(t *testing.T, ns, user string) client.Client {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.EnsureNamespace(ctx, ns))
	require.NoError(t, c.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "service-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}))
	require.NoError(t, c.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "service-writer-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "service-writer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}))
	cfg, err := c.AddUser(user)
	require.NoError(t, err)
	cl, err := client.New(cfg, client.Options{Scheme: bootstrap.Scheme()})
	require.NoError(t, err)
	return cl
}

// metallbRefused waits until MetalLB reports AllocationFailed on the
// Service and asserts it holds no address.
func metallbRefused(t *testing.T, ns, name string) {
	t.Helper()
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assertEvent(t, "Service", ns, name, corev1.EventTypeWarning, "AllocationFailed", "not compatible")
	}, fixture.MetalLBTimeout, fixture.Tick, "MetalLB refuses %s/%s", ns, name)
	assert.Empty(t, fixture.Ingress(suite.GetService(t, ns, name)), "%s/%s holds no address", ns, name)
}

// TestClassRangeBelongsToItsLedger: a fresh class's pool admits only
// Services the driver granted. As a tenant, a Service naming the pool or
// pinning one of its addresses gets nothing from MetalLB; with the grant
// label (which only the admission policy keeps tenants from setting) it
// gets an address, and the grab is reported on the Service, on the class
// and in the metric. Attach and detach, in both handoffs, keep working: the
// attached Service carries the grant label, and a detach withdraws it
// instead of writing a release pin.
func TestClassRangeBelongsToItsLedger(t *testing.T) {
	ctx := context.Background()
	startDriver(t)
	startClassController(t)
	const cls, ns = "grant", "grant-tenant"
	servedClass(t, cls, "192.0.2.0/28")
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		p := getPool(t, cls)
		assert.True(t, marks.RequiresGrant(p, cls), "the pool admits only granted Services: %+v", p.Spec.AllocateTo)
	}, fixture.Timeout, fixture.Tick)
	tenant := tenantClient(t, ns, "grant-tenant-user")

	byPool := sharedLB(ns, "by-pool", "")
	byPool.Annotations[marks.KeyPool] = names.PoolName(cls)
	require.NoError(t, tenant.Create(ctx, byPool))
	byPin := sharedLB(ns, "by-pin", "")
	byPin.Annotations[marks.KeyPin] = "192.0.2.5"
	require.NoError(t, tenant.Create(ctx, byPin))
	metallbRefused(t, ns, "by-pool")
	metallbRefused(t, ns, "by-pin")

	// The grant label, which the admission policy reserves, gets through
	// without it: reported on the Service and the class, and counted.
	grabber := sharedLB(ns, "grab", "")
	grabber.Annotations[marks.KeyPool] = names.PoolName(cls)
	grabber.Labels = map[string]string{marks.LabelGrant: cls}
	require.NoError(t, tenant.Create(ctx, grabber))
	var grabbed string
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		in := fixture.Ingress(suite.GetService(t, ns, "grab"))
		require.Len(t, in, 1)
		grabbed = in[0]
		assertEvent(t, "Service", ns, "grab", corev1.EventTypeWarning, ReasonUnclaimedAddress,
			grabbed, "IPAddressClass "+cls, iadv1alpha1.ServiceClaimAnnotation)
		assertEvent(t, "IPAddressClass", "", cls, corev1.EventTypeWarning, ReasonUnclaimedAddress, ns+"/grab", grabbed)
		assert.Equal(t, 1.0, testutil.ToFloat64(unauthorizedHolders.WithLabelValues(cls)))
	}, fixture.MetalLBTimeout, fixture.Tick, "the grab is reported")
	require.NoError(t, tenant.Delete(ctx, grabber))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.Equal(t, 0.0, testutil.ToFloat64(unauthorizedHolders.WithLabelValues(cls)))
	}, fixture.Timeout, fixture.Tick, "the holder is gone from the metric")

	// Attach and detach through a claim, shared handoff first.
	addrs := provisioned(t, ns, "ip", cls, iadv1alpha1.FamilyIPv4)
	a, ip := addrs[0], addrs[0].Spec.Address
	for _, ph := range suite.PlaceholdersOf(t, a.Name) {
		assert.Equal(t, cls, ph.Labels[marks.LabelGrant], "placeholder %s is granted", ph.Name)
	}
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.True(t, conditions.IsTrue(suite.GetAddress(t, a.Name).Status.Conditions, conditions.Granted))
	}, fixture.Timeout, fixture.Tick)
	require.NoError(t, tenant.Create(ctx, sharedLB(ns, "web", "ip")))
	assertAssociated(t, ns, "web", "ip", ip, a)
	assert.Equal(t, cls, suite.GetService(t, ns, "web").Labels[marks.LabelGrant], "the attached Service is granted")
	detachAndCheck(t, tenant, ns, "web", a)

	// The gap handoff (the Service uses the placeholder's port).
	require.NoError(t, tenant.Create(ctx, lb(ns, "api", "ip")))
	assertAssociated(t, ns, "api", "ip", ip, a)
	assert.Equal(t, cls, suite.GetService(t, ns, "api").Labels[marks.LabelGrant])
	detachAndCheck(t, tenant, ns, "api", a)
	assert.Equal(t, 0.0, testutil.ToFloat64(unauthorizedHolders.WithLabelValues(cls)), "no handoff step was reported as a grab")
}

// detachAndCheck removes the claim annotation as the tenant and waits until
// the address is held again and the Service keeps nothing of the driver's:
// no pin (never a release pin), no marker, no grant label, no address. The
// driver writes the Service once for it (marks.LetGo): one change of its
// metadata after the tenant's, and the address stays associated with the
// Service until MetalLB has taken the address back; then one Event says
// it is detached.
func detachAndCheck(t *testing.T, tenant client.Client, ns, name string, a *iadv1alpha1.IPAddress) {
	t.Helper()
	s := suite.GetService(t, ns, name)
	orig := s.DeepCopy()
	delete(s.Annotations, iadv1alpha1.ServiceClaimAnnotation)
	metaChanges := watchMetadata(t, ns, name)
	require.NoError(t, tenant.Patch(context.Background(), s, client.MergeFrom(orig)))
	for deadline := time.Now().Add(fixture.Timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		// Until MetalLB has let go, the association authorizes the Service
		// (the address is read first: the association is cleared only after
		// the Service stopped holding, so a later read of the Service that
		// still holds must meet it).
		addr := suite.GetAddress(t, a.Name)
		svc := suite.GetService(t, ns, name)
		if !marks.Holds(svc, a.Spec.Address) {
			break
		}
		assert.True(t, AssociatedWith(addr, ns, name) || svc.Annotations[marks.KeyPinnedBy] != "",
			"the Service holds the address with the association or the marker")
	}
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		s := suite.GetService(t, ns, name)
		assert.Empty(t, fixture.Ingress(s))
		assert.NotContains(t, s.Annotations, marks.KeyPin)
		assert.NotContains(t, s.Annotations, marks.KeyPinnedBy)
		assert.NotContains(t, s.Labels, marks.LabelGrant)
		assertEvent(t, "Service", ns, name, corev1.EventTypeNormal, ReasonDetached, a.Spec.Address, a.Name)
	}, fixture.MetalLBTimeout, fixture.Tick)
	assert.Empty(t, suite.Events(t, fixture.About{Kind: "Service", Namespace: ns, Name: name}, ReasonReleasing),
		"a detach in one write tells one Event, Detached")
	assertHeld(t, a.Name, a.Spec.Address)
	for _, e := range suite.Events(t, fixture.About{Kind: "Service", Namespace: ns, Name: name}, "") {
		assert.False(t, releasePinFailure(e), "no impossible pin during the detach: %s", e.Message)
	}
	assert.Equal(t, 2, metaChanges(), "the tenant's write and one of the driver's")
	require.NoError(t, tenant.Delete(context.Background(), suite.GetService(t, ns, name)))
}

// watchMetadata watches one Service from now on and returns a function
// that stops the watch and reports how many times its annotations or
// labels changed. MetalLB's writes are not counted: they change the status
// and the one annotation MetalLB keeps there (ip-allocated-from-pool).
func watchMetadata(t *testing.T, ns, name string) func() int {
	t.Helper()
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Client.Scheme()})
	require.NoError(t, err)
	cur := suite.GetService(t, ns, name)
	w, err := wc.Watch(context.Background(), &corev1.ServiceList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: cur.ResourceVersion}})
	require.NoError(t, err)
	changes := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := cur
		for ev := range w.ResultChan() {
			svc, ok := ev.Object.(*corev1.Service)
			if !ok {
				continue
			}
			if !maps.Equal(notMetalLBs(svc.Annotations), notMetalLBs(last.Annotations)) || !maps.Equal(svc.Labels, last.Labels) {
				changes++
			}
			last = svc
		}
	}()
	return func() int {
		time.Sleep(time.Second) // a late write would show
		w.Stop()
		<-done
		return changes
	}
}

// releasePinFailure reports whether an Event is MetalLB failing to satisfy
// a release pin (the unspecified address of either family).
func releasePinFailure(e corev1.Event) bool {
	return e.Reason == "AllocationFailed" && (strings.Contains(e.Message, "0.0.0.0") || strings.Contains(e.Message, `"::"`))
}

// notMetalLBs is annotations without the one MetalLB writes itself.
func notMetalLBs(annotations map[string]string) map[string]string {
	out := maps.Clone(annotations)
	delete(out, "metallb.io/ip-allocated-from-pool")
	return out
}
