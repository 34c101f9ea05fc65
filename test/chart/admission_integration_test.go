//go:build integration

package chart

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// The package's one local control plane, started by the first test that
// needs it (the rendering tests do not) and stopped by TestMain.
var (
	clusterOnce sync.Once
	testCluster *cluster.Cluster
	clusterErr  error
)

func TestMain(m *testing.M) {
	// The admission tests start the cluster themselves, on first use.
	code := m.Run()
	if testCluster != nil {
		testCluster.Stop()
	}
	os.Exit(code)
}

func startCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	clusterOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		testCluster, clusterErr = cluster.Start(ctx, cluster.Options{NoMetalLB: true, NoControllerManager: true})
	})
	require.NoError(t, clusterErr)
	return testCluster
}

const (
	timeout = 30 * time.Second
	tick    = 100 * time.Millisecond

	tenantNS = "tenant-a"
	policy   = "metallb-iad-reserved-service-fields"
)

// lbService is a LoadBalancer Service in the tenant namespace.
func lbService(name string, annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenantNS, Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			AllocateLoadBalancerNodePorts: new(false),
			Selector:                      map[string]string{"app": name},
			Ports:                         []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
}

// grantServices lets subject write Services in the tenant namespace.
func grantServices(t *testing.T, ctx context.Context, c *cluster.Cluster, name string, subject rbacv1.Subject) {
	t.Helper()
	require.NoError(t, c.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenantNS},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "service-writer"},
		Subjects:   []rbacv1.Subject{subject},
	}))
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	cl, err := client.New(cfg, client.Options{Scheme: bootstrap.Scheme()})
	require.NoError(t, err)
	return cl
}

// requireDenied asserts that err is the policy refusing field.
func requireDenied(t *testing.T, err error, field string) {
	t.Helper()
	require.Error(t, err, "a write of %s was admitted", field)
	assert.True(t, apierrors.IsForbidden(err), "want Forbidden, got %v", err)
	assert.Contains(t, err.Error(), policy)
	assert.Contains(t, err.Error(), field+" is reserved to the metallb-iad driver")
}

// warnings records the API server's warning headers.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.msgs, "\n")
}

// TestAdmissionPolicy installs the chart's admission policy on a real API
// server and writes Services as a tenant, the driver's ServiceAccounts, an
// allowlisted group and the cluster admin.
func TestAdmissionPolicy(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The policy and its binding, as the chart renders them with its
	// default values.
	r, err := Render(Release{Name: "metallb-iad", Namespace: releaseNS}, "")
	require.NoError(t, err)
	// The Gateway and claim policies beside it (the Gateway API is not
	// served here) are installed too: they must not get in the Services'
	// way.
	installPolicies(t, ctx, c, r)

	require.NoError(t, c.EnsureNamespace(ctx, tenantNS))
	require.NoError(t, c.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "service-writer", Namespace: tenantNS},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"services"},
			Verbs: []string{"get", "list", "create", "update", "patch", "delete"},
		}},
	}))
	grantServices(t, ctx, c, "tenant", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"})
	grantServices(t, ctx, c, "cluster-admins", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "kubeadm:cluster-admins"})
	for _, ctl := range controllers {
		grantServices(t, ctx, c, "driver-"+ctl, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: releaseNS, Name: "metallb-iad-" + ctl})
	}
	// A ServiceAccount named like the driver's, in another namespace.
	grantServices(t, ctx, c, "lookalike", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: tenantNS, Name: "metallb-iad-service"})

	tenantCfg, err := c.AddUser("tenant")
	require.NoError(t, err)
	tenant := newClient(t, tenantCfg)

	// The policy takes a moment to be enforced after it is created.
	t.Run("tenant cannot pin an address", func(t *testing.T) {
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			err := tenant.Create(ctx, lbService("probe", map[string]string{marks.KeyPin: "203.0.113.7"}))
			if err == nil {
				_ = tenant.Delete(ctx, lbService("probe", nil))
			}
			require.Error(ct, err, "not enforced yet")
		}, timeout, tick)
		err := tenant.Create(ctx, lbService("pin", map[string]string{marks.KeyPin: "203.0.113.7"}))
		requireDenied(t, err, "annotation "+marks.KeyPin)
		assert.Contains(t, err.Error(), "local.sdn.cozystack.io/ip-address-claim")
	})

	t.Run("tenant cannot set any reserved annotation", func(t *testing.T) {
		for i, key := range reservedAnnotations {
			err := tenant.Create(ctx, lbService(fmt.Sprintf("reserved-%d", i), map[string]string{key: "x"}))
			requireDenied(t, err, "annotation "+key)
		}
	})

	t.Run("tenant cannot set the authorship marker", func(t *testing.T) {
		err := tenant.Create(ctx, lbService("marker", map[string]string{marks.KeyPinnedBy: "tenant-a/claim"}))
		requireDenied(t, err, "annotation "+marks.KeyPinnedBy)
	})

	t.Run("tenant cannot grant itself a class pool", func(t *testing.T) {
		svc := lbService("granted", nil)
		svc.Labels = map[string]string{marks.LabelGrant: "public"}
		requireDenied(t, tenant.Create(ctx, svc), "label "+marks.LabelGrant)

		// Nor add it later, nor remove it from a Service the driver granted.
		plain := lbService("to-grant", nil)
		require.NoError(t, tenant.Create(ctx, plain))
		patch := client.MergeFrom(plain.DeepCopy())
		plain.Labels = map[string]string{marks.LabelGrant: "public"}
		requireDenied(t, tenant.Patch(ctx, plain, patch), "label "+marks.LabelGrant)

		granted := lbService("driver-granted", nil)
		granted.Labels = map[string]string{marks.LabelGrant: "public"}
		require.NoError(t, c.Client.Create(ctx, granted), "system:masters is allowlisted")
		mine := &corev1.Service{}
		require.NoError(t, tenant.Get(ctx, client.ObjectKeyFromObject(granted), mine))
		mine.Labels["tier"] = "front"
		require.NoError(t, tenant.Update(ctx, mine), "an edit keeping the grant is admitted")
		patch = client.MergeFrom(mine.DeepCopy())
		delete(mine.Labels, marks.LabelGrant)
		requireDenied(t, tenant.Patch(ctx, mine, patch), "label "+marks.LabelGrant)
	})

	t.Run("tenant cannot set spec.loadBalancerIP", func(t *testing.T) {
		svc := lbService("lbip", nil)
		svc.Spec.LoadBalancerIP = "203.0.113.8"
		requireDenied(t, tenant.Create(ctx, svc), "spec.loadBalancerIP")
	})

	t.Run("tenant writes a plain Service", func(t *testing.T) {
		svc := lbService("plain", map[string]string{"team": "web"})
		require.NoError(t, tenant.Create(ctx, svc))

		// Edits that leave the reserved fields alone are admitted.
		svc.Labels = map[string]string{"tier": "front"}
		require.NoError(t, tenant.Update(ctx, svc))
		patch := client.MergeFrom(svc.DeepCopy())
		svc.Annotations["team"] = "api"
		require.NoError(t, tenant.Patch(ctx, svc, patch))

		// Adding a reserved field later is refused like at creation.
		patch = client.MergeFrom(svc.DeepCopy())
		svc.Annotations[marks.KeyPool] = "iad-public"
		requireDenied(t, tenant.Patch(ctx, svc, patch), "annotation "+marks.KeyPool)
		fresh := &corev1.Service{}
		require.NoError(t, tenant.Get(ctx, client.ObjectKeyFromObject(svc), fresh))
		fresh.Spec.LoadBalancerIP = "203.0.113.9"
		requireDenied(t, tenant.Update(ctx, fresh), "spec.loadBalancerIP")
	})

	t.Run("admin pins, tenant edits around the pin", func(t *testing.T) {
		svc := lbService("admin-pinned", map[string]string{
			marks.KeyPin:      "203.0.113.10",
			marks.KeySharing:  "key-1",
			marks.KeyPinnedBy: "tenant-a/web",
		})
		svc.Spec.LoadBalancerIP = "203.0.113.10"
		require.NoError(t, c.Client.Create(ctx, svc), "system:masters is allowlisted")

		mine := &corev1.Service{}
		require.NoError(t, tenant.Get(ctx, client.ObjectKeyFromObject(svc), mine))
		mine.Labels = map[string]string{"tier": "front"}
		mine.Annotations["team"] = "web"
		require.NoError(t, tenant.Update(ctx, mine), "an update keeping the reserved fields is admitted")
		patch := client.MergeFrom(mine.DeepCopy())
		mine.Labels["tier"] = "back"
		require.NoError(t, tenant.Patch(ctx, mine, patch))

		patch = client.MergeFrom(mine.DeepCopy())
		mine.Annotations[marks.KeyPin] = "203.0.113.11"
		requireDenied(t, tenant.Patch(ctx, mine, patch), "annotation "+marks.KeyPin)

		require.NoError(t, tenant.Get(ctx, client.ObjectKeyFromObject(svc), mine))
		delete(mine.Annotations, marks.KeyPinnedBy)
		requireDenied(t, tenant.Update(ctx, mine), "annotation "+marks.KeyPinnedBy)

		require.NoError(t, tenant.Get(ctx, client.ObjectKeyFromObject(svc), mine))
		mine.Spec.LoadBalancerIP = ""
		requireDenied(t, tenant.Update(ctx, mine), "spec.loadBalancerIP")

		// Nothing the tenant was refused got through.
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(svc), mine))
		assert.Equal(t, "203.0.113.10", mine.Annotations[marks.KeyPin])
		assert.Equal(t, "tenant-a/web", mine.Annotations[marks.KeyPinnedBy])
		assert.Equal(t, "203.0.113.10", mine.Spec.LoadBalancerIP)
		assert.Equal(t, "back", mine.Labels["tier"])
	})

	t.Run("tenant lets go of every reserved annotation at once", func(t *testing.T) {
		// As a Gateway API implementation that rewrites its Service's
		// annotations wholesale (Contour) does to the driver's marks.
		svc := lbService("let-go", map[string]string{
			marks.KeyPin: "203.0.113.12", marks.KeySharing: "key-3", marks.KeyPinnedBy: "tenant-a/web", marks.KeySharedBy: "tenant-a/web", "team": "web",
		})
		require.NoError(t, c.Client.Create(ctx, svc), "system:masters is allowlisted")
		mine := &corev1.Service{}
		for _, keep := range []string{marks.KeyPin, marks.KeyPinnedBy, marks.KeySharing} {
			require.NoError(t, tenant.Get(ctx, client.ObjectKeyFromObject(svc), mine))
			mine.Annotations = map[string]string{"team": "web", keep: svc.Annotations[keep]}
			err := tenant.Update(ctx, mine)
			require.Error(t, err, "keeping only %s is refused", keep)
			assert.True(t, apierrors.IsForbidden(err), "want Forbidden, got %v", err)
			assert.Contains(t, err.Error(), "is removed only with every other reserved annotation at once")
		}
		require.NoError(t, tenant.Get(ctx, client.ObjectKeyFromObject(svc), mine))
		mine.Annotations = map[string]string{"team": "web"}
		require.NoError(t, tenant.Update(ctx, mine), "letting go of every reserved annotation is admitted")

		patch := client.MergeFrom(mine.DeepCopy())
		mine.Annotations[marks.KeyPin] = "203.0.113.12"
		requireDenied(t, tenant.Patch(ctx, mine, patch), "annotation "+marks.KeyPin)
	})

	t.Run("the driver's writers pin", func(t *testing.T) {
		// Outside the placeholder namespace the driver pins Services it
		// did not create (the driver policy, TestDriverIdentities).
		for _, ctl := range []string{"service", "claim", "ipaddress"} {
			driver := newClient(t, c.ServiceAccountConfig(releaseNS, "metallb-iad-"+ctl))
			svc := lbService("by-"+ctl, map[string]string{"team": "web"})
			require.NoError(t, tenant.Create(ctx, svc), ctl)

			patch := client.MergeFrom(svc.DeepCopy())
			svc.Annotations[marks.KeyPin] = "203.0.113.20"
			svc.Annotations[marks.KeyPinnedBy] = "tenant-a/web"
			svc.Labels = map[string]string{marks.LabelGrant: "public"}
			require.NoError(t, driver.Patch(ctx, svc, patch), ctl)

			patch = client.MergeFrom(svc.DeepCopy())
			svc.Annotations[marks.KeyPin] = "203.0.113.21"
			svc.Annotations[marks.KeySharing] = "key-2"
			svc.Annotations[marks.KeySharedBy] = "tenant-a/web"
			require.NoError(t, driver.Patch(ctx, svc, patch), ctl)

			patch = client.MergeFrom(svc.DeepCopy())
			for _, k := range []string{marks.KeyPin, marks.KeyPinnedBy, marks.KeySharing, marks.KeySharedBy} {
				delete(svc.Annotations, k)
			}
			delete(svc.Labels, marks.LabelGrant)
			require.NoError(t, driver.Patch(ctx, svc, patch), "%s withdraws its pin and grant", ctl)
		}
	})

	t.Run("the class controller is not a writer", func(t *testing.T) {
		class := newClient(t, c.ServiceAccountConfig(releaseNS, "metallb-iad-class"))
		err := class.Create(ctx, lbService("by-class", map[string]string{marks.KeyPin: "203.0.113.30"}))
		requireDenied(t, err, "annotation "+marks.KeyPin)
	})

	t.Run("a driver of another namespace is not a writer", func(t *testing.T) {
		other := newClient(t, c.ServiceAccountConfig(tenantNS, "metallb-iad-service"))
		err := other.Create(ctx, lbService("lookalike", map[string]string{marks.KeyPin: "203.0.113.31"}))
		requireDenied(t, err, "annotation "+marks.KeyPin)
	})

	t.Run("an allowlisted group pins", func(t *testing.T) {
		cfg, err := c.AddUser("ops", "kubeadm:cluster-admins")
		require.NoError(t, err)
		svc := lbService("by-ops", map[string]string{marks.KeyPool: "iad-public"})
		svc.Spec.LoadBalancerIP = "203.0.113.40"
		require.NoError(t, newClient(t, cfg).Create(ctx, svc))
	})

	t.Run("Warn reports without refusing", func(t *testing.T) {
		b := &unstructured.Unstructured{}
		b.SetAPIVersion("admissionregistration.k8s.io/v1")
		b.SetKind("ValidatingAdmissionPolicyBinding")
		require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Name: policy}, b))
		require.NoError(t, unstructured.SetNestedStringSlice(b.Object, []string{"Warn", "Audit"}, "spec", "validationActions"))
		require.NoError(t, c.Client.Update(ctx, b))

		w := &warnings{}
		cfg := rest.CopyConfig(tenantCfg)
		cfg.WarningHandler = w
		warned := newClient(t, cfg)
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			svc := lbService("warned", map[string]string{marks.KeyPin: "203.0.113.50"})
			require.NoError(ct, warned.Create(ctx, svc), "not switched to Warn yet")
		}, timeout, tick)
		assert.Contains(t, w.String(), "annotation "+marks.KeyPin+" is reserved")
	})
}

// installPolicies creates the chart's four admission policies and their
// bindings, once for the package's cluster.
func installPolicies(t *testing.T, ctx context.Context, c *cluster.Cluster, r *Rendered) {
	t.Helper()
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		objs := r.Find(kind)
		require.Len(t, objs, 4, kind)
		for _, o := range objs {
			if err := c.Client.Create(ctx, o.DeepCopy()); !apierrors.IsAlreadyExists(err) {
				require.NoError(t, err, kind)
			}
		}
	}
}

// TestClaimAdmissionPolicy: a class that names the namespaces it admits
// refuses, at admission, a claim from any other, as the chart renders the
// policy; an impersonated tenant with edit rights on claims writes them.
func TestClaimAdmissionPolicy(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Render(Release{Name: "metallb-iad", Namespace: releaseNS}, "")
	require.NoError(t, err)
	installPolicies(t, ctx, c, r)

	namespaces := map[string]map[string]string{"claims-a": nil, "claims-b": {"tier": "silver"}, "claims-c": {"tier": "gold"}}
	tenantCfg, err := c.AddUser("claim-tenant")
	require.NoError(t, err)
	tenant := newClient(t, tenantCfg)
	for ns, labels := range namespaces {
		require.NoError(t, c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}))
		require.NoError(t, c.Client.Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "claim-writer", Namespace: ns},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{iadv1alpha1.GroupVersion.Group}, Resources: []string{"ipaddressclaims"}, Verbs: []string{"*"}}},
		}))
		require.NoError(t, c.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "claim-tenant", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "claim-writer"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "claim-tenant"}},
		}))
	}
	scarce := cluster.Class("scarce", iadv1alpha1.ReclaimDelete,
		`{"addresses": ["203.0.113.0/28"], "namespaces": ["claims-a"], "namespaceSelectors": [{"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]}]}`)
	scarce.Annotations = map[string]string{"ipaddressclass.local.sdn.cozystack.io/is-default-class": "true"}
	require.NoError(t, c.Client.Create(ctx, scarce))
	require.NoError(t, c.Client.Create(ctx, cluster.Class("plenty", iadv1alpha1.ReclaimDelete, `{"addresses": ["198.51.100.0/24"]}`)))
	other := cluster.Class("elsewhere", iadv1alpha1.ReclaimDelete, `{"namespaces": ["claims-a"]}`)
	other.Spec.Provisioner = "other.example.com"
	require.NoError(t, c.Client.Create(ctx, other))

	claim := func(ns, name, class string) *iadv1alpha1.IPAddressClaim {
		return &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: iadv1alpha1.IPAddressClaimSpec{ClassName: class}}
	}
	refused := func(t require.TestingT, err error, ns string) {
		require.Error(t, err, "a claim of %s from the scarce class was admitted", ns)
		assert.True(t, apierrors.IsForbidden(err), "want Forbidden, got %v", err)
		assert.Contains(t, err.Error(), "IPAddressClass scarce does not admit namespace "+ns)
	}

	// The policy takes a moment to be enforced after it is created, and
	// to see a class as a parameter.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		err := tenant.Create(ctx, claim("claims-b", "probe", "scarce"))
		if err == nil {
			_ = tenant.Delete(ctx, claim("claims-b", "probe", ""))
		}
		refused(ct, err, "claims-b")
	}, time.Minute, tick)

	t.Run("a namespace the class names, or selects by label, may claim", func(t *testing.T) {
		require.NoError(t, tenant.Create(ctx, claim("claims-a", "ip", "scarce")))
		require.NoError(t, tenant.Create(ctx, claim("claims-c", "ip", "scarce")))
	})
	t.Run("another namespace may not, by name or as the default class", func(t *testing.T) {
		refused(t, tenant.Create(ctx, claim("claims-b", "ip", "scarce")), "claims-b")
		refused(t, tenant.Create(ctx, claim("claims-b", "default-ip", "")), "claims-b")
	})
	t.Run("a class that names no namespace, or another driver's, admits every one", func(t *testing.T) {
		require.NoError(t, tenant.Create(ctx, claim("claims-b", "plenty-ip", "plenty")))
		require.NoError(t, tenant.Create(ctx, claim("claims-b", "elsewhere-ip", "elsewhere")))
	})
	t.Run("an update onto the class is refused; one that keeps the class is not", func(t *testing.T) {
		c := &iadv1alpha1.IPAddressClaim{}
		require.NoError(t, tenant.Get(ctx, client.ObjectKey{Namespace: "claims-b", Name: "plenty-ip"}, c))
		c.Spec.ClassName = "scarce"
		refused(t, tenant.Update(ctx, c), "claims-b")
	})
	t.Run("a namespace that loses its label keeps its claims, and may edit them", func(t *testing.T) {
		ns := &corev1.Namespace{}
		require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Name: "claims-c"}, ns))
		ns.Labels["tier"] = "silver"
		require.NoError(t, c.Client.Update(ctx, ns))
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			refused(ct, tenant.Create(ctx, claim("claims-c", "second", "scarce")), "claims-c")
		}, time.Minute, tick, "new claims are refused")
		held := &iadv1alpha1.IPAddressClaim{}
		require.NoError(t, tenant.Get(ctx, client.ObjectKey{Namespace: "claims-c", Name: "ip"}, held))
		held.Labels = map[string]string{"team": "web"}
		require.NoError(t, tenant.Update(ctx, held), "an update that keeps the class is admitted")
	})
}
