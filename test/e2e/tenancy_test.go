package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim"
	"github.com/cozystack/metallb-iad/controllers/service"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/marks"
	chartrender "github.com/cozystack/metallb-iad/test/chart"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// The feature `tenancy`: what a tenant with edit rights in one namespace
// can write does not reach another namespace's addresses or Events.

// TestForgedGatewayLabels: the labels that name a Gateway are read only as
// far as the Service's own namespace.
//
//   - In Envoy Gateway's merged mode one Service in the implementation's
//     namespace serves every Gateway of a class, and a tenant's
//     spec.infrastructure.labels reach it: labels naming a Gateway "in"
//     that namespace, beside the class label the implementation writes.
//     The Service here stands for that write (the implementation's, in
//     the administrator's namespace, with the tenant's labels and claim
//     annotation). It must not take the administrator's Bound claim there.
//   - A tenant's own Service labelled as serving a Gateway of another
//     namespace says so on the Service, and writes no Event there.
func TestForgedGatewayLabels(t *testing.T) {
	story(t, "tenancy", "labels a tenant can write name no Gateway outside the Service's namespace", "tenancy-forged", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.class("e2e-tenancy-forged", iadv1alpha1.ReclaimDelete, "192.0.2.128/29")
		admin := newKit(ctx, t, cfg, "tenancy-forged-admin")
		theirs := admin.heldClaim("admin-ip", "e2e-tenancy-forged")

		merged := lbServiceWith(admin.ns, "envoy-merged", map[string]string{
			marks.LabelOwningGatewayClass:     "eg",
			marks.LabelOwningGatewayName:      "tenant-gw",
			marks.LabelOwningGatewayNamespace: admin.ns,
		}, "admin-ip")
		require.NoError(t, k.k.Create(ctx, merged))
		forged := lbServiceWith(k.ns, "web", map[string]string{
			marks.LabelOwningGatewayName:      "prod-gw",
			marks.LabelOwningGatewayNamespace: admin.ns,
		}, "web-ip")
		require.NoError(t, k.k.Create(ctx, forged))

		require.EventuallyWithT(t, func(c *assert.CollectT) {
			admin.assertEvent(c, "Service", admin.ns, merged.Name, corev1.EventTypeWarning, service.ReasonGatewayInOtherNamespace,
				"serves every Gateway of GatewayClass eg")
			k.assertEvent(c, "Service", k.ns, forged.Name, corev1.EventTypeWarning, service.ReasonGatewayInOtherNamespace,
				"serves Gateway "+admin.ns+"/prod-gw")
		}, wait, tick, "both Services are refused, and told why")

		// A moment later nothing moved: the administrator's address is held
		// and attached to nothing, and no Event names a Gateway there.
		time.Sleep(2 * time.Second)
		admin.held(theirs, iadv1alpha1.AddressBound)
		assert.Nil(t, admin.address(theirs.Name).Status.AssociatedTo, "the administrator's address is attached to nothing")
		svc := &corev1.Service{}
		require.NoError(t, k.k.Get(ctx, client.ObjectKeyFromObject(merged), svc))
		assert.NotContains(t, svc.Annotations, marks.KeyPin, "the merged Service is not pinned")
		list := &corev1.EventList{}
		require.NoError(t, k.k.List(ctx, list, client.InNamespace(admin.ns)))
		for _, e := range list.Items {
			assert.NotEqual(t, "Gateway", e.InvolvedObject.Kind, "an Event about Gateway %s/%s: %s", e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message)
		}

		require.NoError(t, k.k.Delete(ctx, merged))
		require.NoError(t, k.k.Delete(ctx, forged))
		admin.deleteClaim("admin-ip")
	})
}

// lbServiceWith is a LoadBalancer Service in ns with labels, naming claim.
func lbServiceWith(ns, name string, labels map[string]string, claim string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels,
			Annotations: map[string]string{iadv1alpha1.ServiceClaimAnnotation: claim}},
		Spec: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			AllocateLoadBalancerNodePorts: ptr.To(false),
			Selector:                      map[string]string{"app": name},
			Ports:                         []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
}

// TestScopedClass: a class that names the namespaces that may claim from
// it. A tenant of another namespace is refused at admission; where the
// policy does not judge (a cluster admin's write), the driver draws
// nothing for the claim and says why; a namespace admitted by label that
// loses it keeps what it holds, and gets nothing new.
func TestScopedClass(t *testing.T) {
	story(t, "tenancy", "a class admits the namespaces it names, by name or by label", "tenancy-scoped", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		const class = "e2e-tenancy-scarce"
		params := `{"addresses": ["192.0.2.160/28"], "namespaces": ["tenancy-scoped"], "namespaceSelectors": [{"matchLabels": {"e2e-tier": "gold"}}]}`
		require.NoError(t, k.k.Create(ctx, cluster.Class(class, iadv1alpha1.ReclaimDelete, params)))
		other := newKit(ctx, t, cfg, "tenancy-other")
		gold := newKit(ctx, t, cfg, "tenancy-gold")
		labelNamespace(t, gold, map[string]string{"e2e-tier": "gold"})

		// Named: the tenant's claim binds and attaches as anywhere.
		a := k.attachedClaim("ip", class, "web")

		// Refused at admission, with the class named.
		tenant := claimTenant(ctx, t, cfg, other)
		err := tenant.Create(ctx, &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: other.ns, Name: "ip"},
			Spec: iadv1alpha1.IPAddressClaimSpec{ClassName: class}})
		require.Error(t, err, "a tenant of a namespace the class does not admit claims from it")
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Contains(t, err.Error(), "IPAddressClass "+class+" does not admit namespace "+other.ns)

		// Past the policy (a cluster admin's write): the driver draws
		// nothing, and says why on the claim.
		other.claim("ip", class, iadv1alpha1.FamilyIPv4)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			other.assertEvent(c, "IPAddressClaim", other.ns, "ip", corev1.EventTypeWarning, claim.ReasonNamespaceNotAdmitted,
				`IPAddressClass "`+class+`" does not admit namespace "`+other.ns+`"`)
		}, wait, tick, "the claim is told why it stays Pending")
		time.Sleep(2 * time.Second)
		assert.Equal(t, iadv1alpha1.ClaimPending, other.claimPhase("ip"))
		assert.Zero(t, boundIn(t, k, other.ns, class), "no address is drawn for a namespace the class does not admit")

		// By label: admitted while it carries the label.
		b := gold.attachedClaim("ip", class, "web")
		labelNamespace(t, gold, map[string]string{"e2e-tier": "silver"})
		gold.claim("second", class, iadv1alpha1.FamilyIPv4)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			gold.assertEvent(c, "IPAddressClaim", gold.ns, "second", corev1.EventTypeWarning, claim.ReasonNamespaceNotAdmitted, class)
		}, wait, tick, "a new claim of the namespace that lost the label is refused")
		time.Sleep(2 * time.Second)
		gold.attached("web", b)
		assert.Equal(t, iadv1alpha1.ClaimBound, gold.claimPhase("ip"), "what the namespace held it keeps")
		k.attached("web", a)

		// The label back: the waiting claim is drawn for.
		labelNamespace(t, gold, map[string]string{"e2e-tier": "gold"})
		gold.bound("second")

		for _, kk := range []*kit{k, gold} {
			kk.deleteService("web")
			kk.deleteClaim("ip")
		}
		gold.deleteClaim("second")
		other.deleteClaim("ip")
		require.NoError(t, k.k.Delete(ctx, &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: class}}))
	})
}

// TestNamespaceBound: a class bounds how many of its addresses one
// namespace holds. A burst of 50 claims at once binds exactly the bound,
// on the first try and with the claim controller's leader killed in the
// middle of the burst; an address given back lets one more bind.
func TestNamespaceBound(t *testing.T) {
	story(t, "tenancy", "a burst of claims binds no more than the class allows a namespace", "tenancy-bound", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		const class, bound, burst = "e2e-tenancy-bounded", 4, 50
		params := fmt.Sprintf(`{"addresses": ["192.0.2.64/26"], "maxAddressesPerNamespace": %d}`, bound)
		require.NoError(t, k.k.Create(ctx, cluster.Class(class, iadv1alpha1.ReclaimDelete, params)))
		other := newKit(ctx, t, cfg, "tenancy-bound-other")

		for _, kill := range []bool{false, true} {
			names := make([]string, burst)
			for i := range names {
				names[i] = fmt.Sprintf("c-%02d", i)
				k.claim(names[i], class, iadv1alpha1.FamilyIPv4)
				if kill && i == burst/2 {
					require.NoError(t, k.fleet.restart(ctx, "claim"))
				}
			}
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.Equal(c, bound, boundIn(c, k, k.ns, class))
				k.assertEvent(c, "IPAddressClaim", k.ns, pendingClaim(c, k, names), corev1.EventTypeWarning, claim.ReasonNamespaceLimit,
					fmt.Sprintf(`Namespace %q holds %d of the %d addresses IPAddressClass %q allows one namespace`, k.ns, bound, bound, class))
			}, metallbWait, tick, "%d claims bound of %d", bound, burst)
			assert.Never(t, func() bool { return boundIn(t, k, k.ns, class) > bound }, 5*time.Second, tick, "never more than the bound")
			t.Logf("burst of %d claims with a bound of %d (claim controller killed mid-burst: %v): %d bound", burst, bound, kill, boundIn(t, k, k.ns, class))

			// Another namespace has a bound of its own.
			other.heldClaim("ip", class)

			// One given back: one more binds, and still no more.
			var gone string
			for _, n := range names {
				if k.claimPhase(n) == iadv1alpha1.ClaimBound {
					gone = n
					break
				}
			}
			k.deleteClaim(gone)
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				n := 0
				for _, name := range names {
					if name != gone && k.claimPhase(name) == iadv1alpha1.ClaimBound {
						n++
					}
				}
				assert.Equal(c, bound, n)
			}, metallbWait, tick, "a claim binds in the place of the one deleted")
			assert.Equal(t, bound, boundIn(t, k, k.ns, class))

			for _, n := range names {
				if n != gone {
					require.NoError(t, k.k.Delete(ctx, &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: n}}))
				}
			}
			other.deleteClaim("ip")
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.Zero(c, boundIn(c, k, k.ns, class))
				list := &iadv1alpha1.IPAddressClaimList{}
				require.NoError(c, k.k.List(ctx, list, client.InNamespace(k.ns)))
				assert.Empty(c, list.Items)
			}, metallbWait, tick, "every claim and address of the burst is gone")
		}
		require.NoError(t, k.k.Delete(ctx, &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: class}}))
	})
}

// TestHandedAddress: how an administrator hands an address to one tenant
// alone. An address pre-bound to a tenant's claim (spec.claimRef) goes to
// that claim and to no other, even of a namespace the class admits; an
// Available address goes to any claim of an admitted namespace that names
// it. One handed to a namespace the class does not admit is bound by the
// core, and never attached.
func TestHandedAddress(t *testing.T) {
	story(t, "tenancy", "an address pre-bound by an administrator goes to the one claim it names", "tenancy-handout", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		const class = "e2e-tenancy-handout"
		other := newKit(ctx, t, cfg, "tenancy-handout-b")
		params := `{"addresses": ["192.0.2.176/29"], "namespaces": ["tenancy-handout", "tenancy-handout-b"]}`
		require.NoError(t, k.k.Create(ctx, cluster.Class(class, iadv1alpha1.ReclaimDelete, params)))
		handed := fixture.IPAddress(t, class, "192.0.2.180", &iadv1alpha1.ClaimReference{Namespace: k.ns, Name: "handed"})
		handed.Spec.ReclaimPolicy = iadv1alpha1.ReclaimDelete
		k.create(handed)
		open := fixture.IPAddress(t, class, "192.0.2.181", nil)
		open.Spec.ReclaimPolicy = iadv1alpha1.ReclaimDelete
		k.create(open)

		// Another admitted namespace names the handed address: not its.
		require.NoError(t, other.k.Create(ctx, &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: other.ns, Name: "grab"},
			Spec: iadv1alpha1.IPAddressClaimSpec{ClassName: class, AddressName: handed.Name}}))
		// It may take the Available one by name.
		require.NoError(t, other.k.Create(ctx, &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: other.ns, Name: "open"},
			Spec: iadv1alpha1.IPAddressClaimSpec{ClassName: class, AddressName: open.Name}}))
		assert.Equal(t, "192.0.2.181", other.bound("open")[0].Address, "an Available address goes to the claim naming it")

		// The tenant it was handed to claims it, by the claim's name alone.
		k.claim("handed", class, iadv1alpha1.FamilyIPv4)
		assert.Equal(t, "192.0.2.180", k.bound("handed")[0].Address, "the pre-bound address goes to the claim it names")
		assert.Equal(t, iadv1alpha1.ClaimPending, other.claimPhase("grab"), "and to no other")

		// Handed to a claim of a namespace the class does not admit: the
		// core binds it, and the driver never attaches it.
		outside := newKit(ctx, t, cfg, "tenancy-handout-c")
		stray := fixture.IPAddress(t, class, "192.0.2.182", &iadv1alpha1.ClaimReference{Namespace: outside.ns, Name: "stray"})
		stray.Spec.ReclaimPolicy = iadv1alpha1.ReclaimDelete
		k.create(stray)
		outside.claim("stray", class, iadv1alpha1.FamilyIPv4)
		a := outside.bound("stray")[0]
		outside.service("web", "stray")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			outside.assertEvent(c, "Service", outside.ns, "web", corev1.EventTypeWarning, service.ReasonNamespaceNotAdmitted,
				`IPAddressClass "`+class+`", which does not admit this namespace`)
		}, wait, tick, "the Service is told why it gets no address")
		time.Sleep(2 * time.Second)
		assert.Empty(t, outside.ingressOf("web"), "the address is not attached")
		assert.Nil(t, outside.address(a.Name).Status.AssociatedTo)

		outside.deleteService("web")
		outside.deleteClaim("stray")
		k.deleteClaim("handed")
		other.deleteClaim("open")
		other.deleteClaim("grab")
		require.NoError(t, k.k.Delete(ctx, &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: class}}))
	})
}

// boundIn counts the addresses of class whose claim is in namespace ns
// and that are not being deleted.
func boundIn(t require.TestingT, k *kit, ns, class string) int {
	list := &iadv1alpha1.IPAddressList{}
	require.NoError(t, k.k.List(k.ctx, list))
	n := 0
	for _, a := range list.Items {
		if a.Spec.ClassName == class && a.Spec.ClaimRef != nil && a.Spec.ClaimRef.Namespace == ns && a.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// pendingClaim names one of the claims that is not Bound.
func pendingClaim(t require.TestingT, k *kit, names []string) string {
	for _, n := range names {
		c := &iadv1alpha1.IPAddressClaim{}
		require.NoError(t, k.k.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: n}, c))
		if c.Status.Phase != iadv1alpha1.ClaimBound {
			return n
		}
	}
	return ""
}

// labelNamespace sets the labels of the kit's namespace (the others kept).
func labelNamespace(t *testing.T, k *kit, labels map[string]string) {
	ns := &corev1.Namespace{}
	require.NoError(t, k.k.Get(k.ctx, client.ObjectKey{Name: k.ns}, ns))
	patch := client.MergeFrom(ns.DeepCopy())
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	for key, v := range labels {
		ns.Labels[key] = v
	}
	require.NoError(t, k.k.Patch(k.ctx, ns, patch))
}

// claimTenant is a tenant who may write the claims of the kit's namespace
// and nothing else, impersonated, with the chart's claim policy judging
// that namespace (installed here on the local provider; the chart
// installed it everywhere on the others).
func claimTenant(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) client.Client {
	const user = "e2e-claim-tenant"
	if local != nil {
		r, err := chartrender.Render(chartrender.Release{},
			`{"admissionPolicy": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "`+k.ns+`"}}}}`)
		require.NoError(t, err)
		for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			for _, o := range r.Find(kind) {
				if o.GetName() != "metallb-iad-class-namespaces" {
					continue
				}
				require.NoError(t, k.k.Create(ctx, o))
				t.Cleanup(func() { _ = k.k.Delete(context.Background(), o) })
			}
		}
	}
	k.create(&rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: user},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{iadv1alpha1.GroupVersion.Group}, Resources: []string{"ipaddressclaims"}, Verbs: []string{"*"}}},
	})
	k.create(&rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})
	rc := rest.CopyConfig(cfg.Client().RESTConfig())
	rc.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	tenant, err := client.New(rc, client.Options{Scheme: bootstrap.Scheme()})
	require.NoError(t, err)
	// The policy takes a moment to be enforced once created.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		probe := &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: "probe"},
			Spec: iadv1alpha1.IPAddressClaimSpec{ClassName: "e2e-tenancy-scarce"}}
		err := tenant.Create(ctx, probe)
		if err == nil {
			_ = k.k.Delete(ctx, probe)
		}
		assert.Error(c, err, "not enforced yet")
	}, wait, tick)
	return tenant
}
