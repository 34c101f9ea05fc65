//go:build integration

package chart

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/stale"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// driverNS is the tenant namespace of TestDriverIdentities: apart from
// tenantNS, where TestAdmissionPolicy grants the driver more than the chart.
const driverNS = "tenant-d"

// driverPolicy is the name of the policy bounding the driver's identities.
const driverPolicy = "metallb-iad-driver-service-writes"

// TestDriverIdentities grants each controller's ServiceAccount exactly the
// RBAC the chart renders, installs the chart's policies on a real API
// server, and writes as that ServiceAccount (impersonated): a write the
// controller makes is admitted, one it never makes is refused, by RBAC
// where RBAC can say it and by the driver policy where it cannot.
func TestDriverIdentities(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	r, err := Render(Release{Name: "metallb-iad", Namespace: releaseNS}, "")
	require.NoError(t, err)
	installPolicies(t, ctx, c, r)
	require.NoError(t, c.EnsureNamespace(ctx, releaseNS))
	require.NoError(t, c.EnsureNamespace(ctx, driverNS))
	installRBAC(t, ctx, c, r)

	as := func(ctl string) client.Client {
		return newClient(t, c.ServiceAccountConfig(releaseNS, "metallb-iad-"+ctl))
	}
	claim, ipaddress, service, class := as("claim"), as("ipaddress"), as("service"), as("class")

	// A tenant's Service, written by the admin: pinned by hand, with a pool
	// request, a selector and a label of its own.
	tenantService := func(name string, annotations map[string]string) *corev1.Service {
		svc := lbService(name, annotations)
		svc.Namespace = driverNS
		svc.Labels = map[string]string{"app": name}
		require.NoError(t, c.Client.Create(ctx, svc))
		return svc
	}
	// The Service that clears a stale allocation, as internal/stale makes it.
	clearer := func(name string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: driverNS, Name: name, Annotations: marks.StaleClearer("free address 203.0.113.1")},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone},
		}
	}
	// metaPatch is a merge patch of the driver's kind: metadata only,
	// locked to the version read.
	metaPatch := func(cl client.Client, svc *corev1.Service, change func(*corev1.Service)) error {
		fresh := &corev1.Service{}
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(svc), fresh))
		if fresh.Annotations == nil {
			fresh.Annotations = map[string]string{}
		}
		orig := fresh.DeepCopy()
		change(fresh)
		return cl.Patch(ctx, fresh, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	}

	// The policy takes a moment to be enforced after it is created.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		probe := lbService("probe", nil)
		probe.Namespace = driverNS
		err := claim.Create(ctx, probe)
		if err == nil {
			_ = c.Client.Delete(ctx, probe)
		}
		require.Error(ct, err, "not enforced yet")
		require.Contains(ct, err.Error(), driverPolicy)
	}, timeout, tick)

	t.Run("claim", func(t *testing.T) {
		// Admitted: the placeholder, in the placeholder namespace.
		ph := lbService("placeholder", map[string]string{marks.KeyPin: "203.0.113.60"})
		ph.Namespace = releaseNS
		require.NoError(t, claim.Create(ctx, ph))
		require.NoError(t, claim.Delete(ctx, ph))

		// Admitted: the stale-allocation clear, created and deleted, as
		// the controller makes it.
		cleared, err := stale.Clear(ctx, claim, c.Client, types.NamespacedName{Namespace: driverNS, Name: "stale-by-claim"}, "free address 203.0.113.1")
		require.NoError(t, err)
		assert.True(t, cleared, "the clear was refused")

		// Refused by the policy: any other Service there.
		lb := lbService("lb-by-claim", nil)
		lb.Namespace = driverNS
		requireDriverDenied(t, claim.Create(ctx, lb), "only to clear a stale MetalLB allocation")
		selected := clearer("selected-by-claim")
		selected.Spec.Selector = map[string]string{"app": "db"}
		requireDriverDenied(t, claim.Create(ctx, selected), "only to clear a stale MetalLB allocation")

		// Refused by the policy: deleting a tenant's Service.
		victim := tenantService("victim-of-claim", nil)
		requireDriverDenied(t, claim.Delete(ctx, victim), "deletes a Service outside its placeholder namespace only")

		// Refused by RBAC: the claim controller patches no Service outside
		// the placeholder namespace.
		requireRBACDenied(t, stale.Poke(ctx, claim, victim))
	})

	t.Run("ipaddress", func(t *testing.T) {
		svc := tenantService("retried", nil)
		// Admitted, as the controller writes them: the retry mark, dropping
		// an IP from a pin the driver wrote, then withdrawing it, and the
		// stale-allocation clear.
		require.NoError(t, stale.Poke(ctx, ipaddress, svc))
		pinned := tenantService("driver-pinned", map[string]string{marks.KeyPin: "203.0.113.61,203.0.113.62", marks.KeyPinnedBy: "tenant-d/web"})
		require.NoError(t, metaPatch(ipaddress, pinned, func(s *corev1.Service) {
			marks.Edit(s, func(m *marks.Marks) { require.True(t, m.DropIP("203.0.113.62")) })
		}))
		require.NoError(t, metaPatch(ipaddress, pinned, func(s *corev1.Service) { marks.Edit(s, (*marks.Marks).Withdraw) }))
		cleared, err := stale.Clear(ctx, ipaddress, c.Client, types.NamespacedName{Namespace: driverNS, Name: "stale-by-ipaddress"}, "address-1")
		require.NoError(t, err)
		assert.True(t, cleared, "the clear was refused")

		// Refused: the selector, the ports, a hand-written pin, a label of
		// the tenant's, deleting the tenant's Service.
		requireDriverDenied(t, metaPatch(ipaddress, svc, func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "other"} }),
			"never changes a Service's spec")
		requireDriverDenied(t, metaPatch(ipaddress, svc, func(s *corev1.Service) { s.Spec.Ports[0].Port = 8080 }),
			"never changes a Service's spec")
		hand := tenantService("hand-pinned", map[string]string{marks.KeyPin: "203.0.113.63"})
		requireDriverDenied(t, metaPatch(ipaddress, hand, func(s *corev1.Service) { delete(s.Annotations, marks.KeyPin) }),
			"never changes, removes or claims it")
		requireDriverDenied(t, metaPatch(ipaddress, svc, func(s *corev1.Service) { s.Labels["app"] = "other" }),
			"changes no label of a Service but")
		requireDriverDenied(t, ipaddress.Delete(ctx, svc), "deletes a Service outside its placeholder namespace only")
	})

	t.Run("service", func(t *testing.T) {
		// Admitted, as the controller writes them: the attach's one write
		// (the pool request moved aside, the pin and sharing key with
		// their markers, the grant label), the release's two steps, an
		// import of a Service pinned by hand.
		svc := tenantService("attached", map[string]string{marks.KeyPool: "tenant-pool", marks.KeyClaim: "web"})
		require.NoError(t, metaPatch(service, svc, func(s *corev1.Service) {
			a := marks.Of(s).Attach(s, "tenant-d/web", "203.0.113.64", "key-1", "public")
			require.True(t, a.Pinned)
		}))
		released := tenantService("released", map[string]string{marks.KeyClaim: "db"})
		require.NoError(t, metaPatch(service, released, func(s *corev1.Service) {
			marks.Of(s).Attach(s, "tenant-d/db", "203.0.113.68", "key-2", "public")
		}))
		require.NoError(t, metaPatch(service, released, func(s *corev1.Service) {
			marks.Edit(s, func(m *marks.Marks) { m.Release("203.0.113.255"); m.Grant = "" })
		}))
		require.NoError(t, metaPatch(service, released, func(s *corev1.Service) { marks.Edit(s, (*marks.Marks).Withdraw) }))
		imported := tenantService("imported", map[string]string{marks.KeyPin: "203.0.113.69", marks.KeyPool: "tenant-pool"})
		require.NoError(t, metaPatch(service, imported, func(s *corev1.Service) {
			s.Annotations = marks.Imported(s.Annotations, "imported-abc")
			marks.Edit(s, func(m *marks.Marks) { m.KeepOwnerPin("203.0.113.69"); m.Grant = "public" })
		}))

		// Refused: re-pointing a pin at another address without its
		// marker, a hand-written pin, a pool request, the claim
		// annotation, the selector, the type, spec.loadBalancerIP.
		requireDriverDenied(t, metaPatch(service, svc, func(s *corev1.Service) {
			delete(s.Annotations, marks.KeyPinnedBy)
			s.Annotations[marks.KeyPin] = "203.0.113.65"
		}), "carries "+marks.KeyPinnedBy)
		hand := tenantService("hand-pinned-too", map[string]string{marks.KeyPin: "203.0.113.66"})
		requireDriverDenied(t, metaPatch(service, hand, func(s *corev1.Service) {
			s.Annotations[marks.KeyPin] = "203.0.113.67"
			s.Annotations[marks.KeyPinnedBy] = "tenant-d/web"
		}), "never changes, removes or claims it")
		requireDriverDenied(t, metaPatch(service, svc, func(s *corev1.Service) { s.Annotations[marks.KeyPool] = "other-pool" }),
			"only removes MetalLB's pool request")
		requireDriverDenied(t, metaPatch(service, svc, func(s *corev1.Service) { s.Annotations[marks.KeyClaim] = "someone-elses" }),
			"only when it imports the Service")
		requireDriverDenied(t, metaPatch(service, svc, func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "other"} }),
			"never changes a Service's spec")
		requireDriverDenied(t, metaPatch(service, svc, func(s *corev1.Service) { s.Annotations["team"] = "ops" }),
			"changes no annotation of a Service but")

		// Refused by RBAC: the service controller creates and deletes no Service.
		requireRBACDenied(t, service.Create(ctx, clearer("stale-by-service")))
		requireRBACDenied(t, service.Delete(ctx, svc))

		// Nothing refused got through.
		got := &corev1.Service{}
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(svc), got))
		assert.Equal(t, "203.0.113.64", got.Annotations[marks.KeyPin])
		assert.Equal(t, "web", got.Annotations[marks.KeyClaim])
		assert.Equal(t, map[string]string{"app": "attached"}, got.Spec.Selector)
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(hand), got))
		assert.Equal(t, "203.0.113.66", got.Annotations[marks.KeyPin])
	})

	t.Run("class", func(t *testing.T) {
		// Admitted: a class pool in MetalLB's namespace.
		pool := &metallbv1beta1.IPAddressPool{
			ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: "iad-class-public"},
			Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"203.0.113.128/28"}},
		}
		require.NoError(t, class.Create(ctx, pool))
		require.NoError(t, class.Delete(ctx, pool))

		// Refused by RBAC: a pool anywhere else, and any Service.
		elsewhere := pool.DeepCopy()
		elsewhere.Namespace, elsewhere.ResourceVersion = driverNS, ""
		requireRBACDenied(t, class.Create(ctx, elsewhere))
		svc := tenantService("not-for-class", nil)
		requireRBACDenied(t, metaPatch(class, svc, func(s *corev1.Service) { s.Annotations[marks.KeyMetalLBRetry] = "now" }))
		requireRBACDenied(t, class.Get(ctx, types.NamespacedName{Namespace: driverNS, Name: "not-for-class"}, &corev1.Service{}))
	})
}

// installRBAC creates the chart's RBAC for the controllers: ServiceAccounts
// are not needed to impersonate them.
func installRBAC(t *testing.T, ctx context.Context, c *cluster.Cluster, r *Rendered) {
	t.Helper()
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		for _, o := range r.Find(kind) {
			if err := c.Client.Create(ctx, o.DeepCopy()); !apierrors.IsAlreadyExists(err) {
				require.NoError(t, err, "%s %s/%s", kind, o.GetNamespace(), o.GetName())
			}
		}
	}
}

// requireDriverDenied asserts that err is the driver policy refusing, with
// a message that says why.
func requireDriverDenied(t *testing.T, err error, why string) {
	t.Helper()
	require.Error(t, err, "a write the driver never makes was admitted")
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "want Forbidden, got %v", err)
	assert.Contains(t, err.Error(), driverPolicy)
	assert.Contains(t, err.Error(), why)
}

// requireRBACDenied asserts that err is RBAC refusing, before any policy.
func requireRBACDenied(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err, "a write RBAC should refuse was admitted")
	assert.True(t, apierrors.IsForbidden(err), "want Forbidden, got %v", err)
	assert.NotContains(t, err.Error(), driverPolicy)
	assert.Contains(t, err.Error(), "cannot")
}
