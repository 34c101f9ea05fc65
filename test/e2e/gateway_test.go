package e2e

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/service"
	"github.com/cozystack/metallb-iad/internal/marks"
	chartrender "github.com/cozystack/metallb-iad/test/chart"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// The feature `gateway`: a Gateway keeps its address through a claim, on
// each Gateway API implementation of gatewayImpls. A tenant writes the
// claim annotation in the Gateway's spec.infrastructure.annotations; the
// implementation copies it onto the Service it creates for the Gateway,
// and the driver attaches that Service as any other.

// gatewayImpl is a Gateway API implementation the feature runs on: a row
// of the README's compatibility table tested here.
type gatewayImpl struct {
	// name is the implementation as the README's table names it.
	name string
	// ns, class and cidr are its story's namespace, IPAddressClass and
	// class addresses; gatewayClass the GatewayClass it accepts.
	ns, class, cidr, gatewayClass string
	// services find the Services it runs for the Gateway ns/name.
	services func(ns, name string) []client.ListOption
	// start runs it on the provider (it skips where it cannot run).
	start func(ctx context.Context, t *testing.T)
	// perGateway starts what it needs for each Gateway (Contour: the
	// status writer); nil when nothing.
	perGateway func(ns, name string) error
	// owned: its Service carries an owner reference to the Gateway, so an
	// Event about the Service reaches `kubectl describe gateway`; without
	// one it reaches `kubectl events --for gateway/NAME`.
	owned bool
	// keepsAddresses: it leaves the Gateway's status.addresses as they
	// were when the Service loses its address (Contour 1.33 writes them
	// only from a Service that has one).
	keepsAddresses bool
	// addressesTo is the Service field it copies spec.addresses into:
	// externalIPs, which MetalLB ignores, or loadBalancerIP, which the
	// Service policy refuses it; log is its log, where that refusal shows.
	addressesTo string
	log         func() string
}

// gatewayImpls are the implementations the feature runs on. A third is a
// row here (and its build in hack/tools, its start in test/cluster).
func gatewayImpls() []*gatewayImpl {
	return []*gatewayImpl{
		{
			name: "Envoy Gateway (Gateway Namespace mode)", ns: "gateway", class: "e2e-gateway", cidr: "192.0.2.0/28",
			gatewayClass: cluster.EnvoyGatewayClass, owned: true, addressesTo: "externalIPs",
			services: func(ns, name string) []client.ListOption {
				return []client.ListOption{client.MatchingLabels{marks.LabelOwningGatewayName: name, marks.LabelOwningGatewayNamespace: ns}}
			},
			start: func(ctx context.Context, t *testing.T) { startGateways(ctx, t, cluster.GatewayNamespaceMode) },
		},
		{
			name: "Contour (gateway provisioner)", ns: "gateway-contour", class: "e2e-gateway-contour", cidr: "192.0.2.32/28",
			gatewayClass: cluster.ContourClass, keepsAddresses: true, addressesTo: "loadBalancerIP",
			log: func() string { return local.contour.Provisioner.LogPath },
			services: func(ns, name string) []client.ListOption {
				return []client.ListOption{client.InNamespace(ns), client.MatchingLabels{marks.LabelGatewayName: name}}
			},
			start: func(ctx context.Context, t *testing.T) {
				if local == nil {
					t.Skip("Contour runs as processes beside the local control plane only")
				}
				require.NoError(t, local.StartContour(ctx))
			},
			perGateway: func(ns, name string) error { return local.contour.Serve(ns, name) },
		},
	}
}

// gatewayOn is the kit's namespace on one implementation.
type gatewayOn struct {
	*kit
	impl *gatewayImpl
}

// gateway creates the Gateway name, with the claim annotation naming claim
// ("" for none).
func (k gatewayOn) gateway(name, claim string) {
	require.NoError(k.t, k.create(name, claim, k.k))
}

// create creates the Gateway name as c, with the claim annotation naming
// claim ("" for none) and addresses in spec.addresses.
func (k gatewayOn) create(name, claim string, c client.Client, addresses ...string) error {
	if k.impl.perGateway != nil {
		require.NoError(k.t, k.impl.perGateway(k.ns, name))
	}
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "Gateway",
		"metadata":   map[string]any{"name": name, "namespace": k.ns},
		"spec": map[string]any{
			"gatewayClassName": k.impl.gatewayClass,
			"listeners":        []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}},
		},
	}}
	if claim != "" {
		_ = unstructured.SetNestedStringMap(gw.Object, map[string]string{iadv1alpha1.ServiceClaimAnnotation: claim}, "spec", "infrastructure", "annotations")
	}
	var addrs []any
	for _, a := range addresses {
		addrs = append(addrs, map[string]any{"type": "IPAddress", "value": a})
	}
	if addrs != nil {
		_ = unstructured.SetNestedSlice(gw.Object, addrs, "spec", "addresses")
	}
	return c.Create(k.ctx, gw)
}

// setGatewayClaim points the Gateway's infrastructure annotation at claim,
// or removes it ("").
func (k *kit) setGatewayClaim(name, claim string) {
	var value any
	if claim != "" {
		value = claim
	}
	patch := map[string]any{"spec": map[string]any{"infrastructure": map[string]any{"annotations": map[string]any{iadv1alpha1.ServiceClaimAnnotation: value}}}}
	gw := gatewayObject(k.ns, name)
	require.NoError(k.t, k.k.Patch(k.ctx, gw, client.RawPatch(types.MergePatchType, mustJSON(k.t, patch))))
}

func gatewayObject(ns, name string) *unstructured.Unstructured {
	gw := &unstructured.Unstructured{}
	gw.SetAPIVersion("gateway.networking.k8s.io/v1")
	gw.SetKind("Gateway")
	gw.SetNamespace(ns)
	gw.SetName(name)
	return gw
}

func (k *kit) readGateway(t require.TestingT, name string) *unstructured.Unstructured {
	gw := gatewayObject(k.ns, name)
	require.NoError(t, k.k.Get(k.ctx, client.ObjectKeyFromObject(gw), gw))
	return gw
}

// gatewayIPs are the Gateway's status.addresses.
func gatewayIPs(gw *unstructured.Unstructured) []string {
	addrs, _, _ := unstructured.NestedSlice(gw.Object, "status", "addresses")
	var out []string
	for _, a := range addrs {
		if m, ok := a.(map[string]any); ok {
			if v, ok := m["value"].(string); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// gatewayServices are the LoadBalancer Services the implementation runs
// for the Gateway name of the kit's namespace (in the Gateway's namespace,
// or the implementation's), found by the labels it writes.
func (k gatewayOn) gatewayServices(t require.TestingT, name string) []corev1.Service {
	list := &corev1.ServiceList{}
	require.NoError(t, k.k.List(k.ctx, list, k.impl.services(k.ns, name)...))
	var out []corev1.Service
	for _, s := range list.Items {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			out = append(out, s)
		}
	}
	return out
}

// gatewayService is the one LoadBalancer Service of the Gateway name.
func (k gatewayOn) gatewayService(t require.TestingT, name string) *corev1.Service {
	svcs := k.gatewayServices(t, name)
	require.Len(t, svcs, 1, "one LoadBalancer Service serves Gateway %s/%s", k.ns, name)
	return &svcs[0]
}

// gatewayAttached waits until the Gateway's Service is attached to a, and
// the Gateway's status.addresses show a's IP; it returns the Service's name.
func (k gatewayOn) gatewayAttached(name string, a iadv1alpha1.ClaimedAddress) string {
	var svc string
	require.EventuallyWithT(k.t, func(t *assert.CollectT) {
		svc = k.gatewayService(t, name).Name
		assert.Equal(t, []string{a.Address}, gatewayIPs(k.readGateway(t, name)), "the Gateway's status.addresses")
	}, wait, tick, "Gateway %s/%s shows %s", k.ns, name, a.Address)
	k.attached(svc, a)
	return svc
}

func (k gatewayOn) deleteGateway(name string) {
	require.NoError(k.t, k.k.Delete(k.ctx, gatewayObject(k.ns, name)))
	require.EventuallyWithT(k.t, func(t *assert.CollectT) {
		err := k.k.Get(k.ctx, client.ObjectKeyFromObject(gatewayObject(k.ns, name)), &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway"}})
		assert.True(t, apierrors.IsNotFound(err), "the Gateway is gone")
		assert.Empty(t, k.gatewayServices(t, name), "its Service is gone")
	}, wait, tick, "Gateway %s/%s and its Service are gone", k.ns, name)
}

// reasonsAbout are the reasons of the service controller's Events about an
// object, as a sorted set: its decisions about an attachment. (Which of
// two controllers withdraws the pin of a deleted claim's address, and so
// which records it, is a race: the ipaddress controller's PinWithdrawn is
// left out.)
func (k *kit) reasonsAbout(t require.TestingT, kind, ns, name string) []string {
	seen := map[string]bool{}
	for _, e := range k.eventsAbout(t, kind, ns, name) {
		if e.Source.Component == service.RecorderName || e.ReportingController == service.RecorderName {
			seen[e.Reason] = true
		}
	}
	out := make([]string, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// describedGateway are the reasons and messages of the Events about the
// Gateway: by its kind, name and uid, as `kubectl describe gateway` lists
// them, where the implementation's owner reference gives the driver the
// uid; by kind and name, as `kubectl events --for gateway/NAME` does,
// where it does not.
func (k gatewayOn) describedGateway(t require.TestingT, name string) []string {
	fields := client.MatchingFields{"involvedObject.kind": "Gateway", "involvedObject.name": name}
	if k.impl.owned {
		fields["involvedObject.uid"] = string(k.readGateway(t, name).GetUID())
	}
	list := &corev1.EventList{}
	require.NoError(t, k.k.List(k.ctx, list, client.InNamespace(k.ns), fields))
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

// writesTo counts the writes to a Service over d, as a watch sees them.
func (k *kit) writesTo(t *testing.T, cfg *envconf.Config, ns, name string, d time.Duration) int {
	w, err := client.NewWithWatch(cfg.Client().RESTConfig(), client.Options{})
	require.NoError(t, err)
	svc := k.readService(t, name)
	if svc.Namespace != ns {
		svc = &corev1.Service{}
		require.NoError(t, k.k.Get(k.ctx, client.ObjectKey{Namespace: ns, Name: name}, svc))
	}
	ctx, cancel := context.WithTimeout(k.ctx, d)
	defer cancel()
	watcher, err := w.Watch(ctx, &corev1.ServiceList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: svc.ResourceVersion}})
	require.NoError(t, err)
	defer watcher.Stop()
	writes := 0
	for {
		select {
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				return writes
			}
			if ev.Type == watch.Modified || ev.Type == watch.Deleted || ev.Type == watch.Added {
				writes++
				if s, ok := ev.Object.(*corev1.Service); ok {
					t.Logf("write to %s/%s: resourceVersion %s", ns, name, s.ResourceVersion)
				}
			}
		case <-ctx.Done():
			return writes
		}
	}
}

// startGateways runs the Gateway API implementation in mode for the
// provider (one at a time: a new mode replaces the running one).
func startGateways(ctx context.Context, t *testing.T, mode cluster.EnvoyGatewayMode) {
	t.Helper()
	switch {
	case local != nil:
		require.NoError(t, local.StartGateways(ctx, mode))
	default:
		require.NoError(t, chartGateways(ctx, t, mode))
	}
}

// TestGateway: on each implementation, a Gateway keeps its address
// through a claim, across re-creates, claim switches and the claim's
// deletion, with the Events on the Gateway, nothing written in steady
// state, the admission policy applied to the Gateway's infrastructure maps
// and to spec.addresses beside a claim.
//
// What it measured with Envoy Gateway v1.9.1: the implementation writes
// the Service by server-side apply (field manager envoy-gateway), which
// leaves the driver's pin, markers and grant label alone and drops the
// claim annotation when the Gateway drops it; spec.addresses becomes
// externalIPs, and the claim attaches. With Contour v1.33.8: the
// provisioner rewrites the Service's annotations wholesale at each Gateway
// change (the new listener, the claim switches), dropping the driver's
// marks, which the driver writes again; spec.addresses becomes
// spec.loadBalancerIP, which the Service policy refuses it. Both: no write
// to the attached Service in a minute; the same Events as a plain Service
// through re-creates, switches, detaches and the claim's deletion.
func TestGateway(t *testing.T) {
	for _, impl := range gatewayImpls() {
		t.Run(impl.name, func(t *testing.T) { testGateway(t, impl) })
	}
}

func testGateway(t *testing.T, impl *gatewayImpl) {
	story(t, "gateway", "a Gateway keeps its IP through a claim ("+impl.name+")", impl.ns, func(ctx context.Context, t *testing.T, cfg *envconf.Config, kk *kit) {
		impl.start(ctx, t)
		k := gatewayOn{kit: kk, impl: impl}
		policy := k.gatewayPolicy(ctx, cfg)
		k.class(impl.class, iadv1alpha1.ReclaimDelete, impl.cidr)
		a := k.heldClaim("web-ip", impl.class)
		twin := k.heldClaim("twin-ip", impl.class)

		// 1. The Gateway's Service gets the claimed IP; the Gateway shows it.
		k.gateway("web", "web-ip")
		svc := k.gatewayAttached("web", a)
		k.service("twin", "twin-ip")
		k.attached("twin", twin)

		// 7. The attachment's Events reach `kubectl describe gateway`.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			said := strings.Join(k.describedGateway(c, "web"), "\n")
			assert.Contains(c, said, service.ReasonAssociated+": Service "+k.ns+"/"+svc+": Attached claim \"web-ip\"")
		}, wait, tick, "kubectl describe gateway shows the Associated Event")

		// 3. Steady state: nobody writes the Gateway's Service.
		n := k.writesTo(t, cfg, k.ns, svc, time.Minute)
		assert.Zero(t, n, "writes to the attached Gateway's Service over a minute")

		// The implementation's own later writes keep the driver's marks: a
		// new listener makes it apply the Service again, with its ports.
		listeners := map[string]any{"spec": map[string]any{"listeners": []any{
			map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"},
			map[string]any{"name": "alt", "port": int64(8080), "protocol": "HTTP"},
		}}}
		require.NoError(t, k.k.Patch(ctx, gatewayObject(k.ns, "web"), client.RawPatch(types.MergePatchType, mustJSON(t, listeners))))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var ports []int32
			for _, p := range k.readService(c, svc).Spec.Ports {
				ports = append(ports, p.Port)
			}
			assert.Contains(c, ports, int32(8080), "the implementation rewrote the Service's ports")
		}, wait, tick)
		k.attached(svc, a)

		// 2. Delete and re-create the Gateway five times: same IP; the
		// claim stays Bound and the address held in between. A plain
		// Service re-created beside it, for the comparison.
		var gwTook, svcTook []time.Duration
		for i := range 5 {
			start := time.Now()
			k.deleteGateway("web")
			k.held(a, iadv1alpha1.AddressBound)
			k.gateway("web", "web-ip")
			svc = k.gatewayAttached("web", a)
			gwTook = append(gwTook, time.Since(start))

			start = time.Now()
			k.deleteService("twin")
			k.held(twin, iadv1alpha1.AddressBound)
			k.service("twin", "twin-ip")
			k.attached("twin", twin)
			svcTook = append(svcTook, time.Since(start))
			t.Logf("re-create %d: Gateway delete -> same IP %s; plain Service %s", i+1, gwTook[i].Round(time.Millisecond), svcTook[i].Round(time.Millisecond))
			assert.Equal(t, iadv1alpha1.ClaimBound, k.claimPhase("web-ip"))
		}
		t.Logf("re-create p50 (%s): Gateway %s, plain Service %s", impl.name, median(gwTook).Round(time.Millisecond), median(svcTook).Round(time.Millisecond))

		// 4. Switch claims, remove the annotation, delete the claim: the
		// Gateway's Service lives through what the plain twin does, with
		// the same Events.
		b := k.heldClaim("web-ip-2", impl.class)
		twinB := k.heldClaim("twin-ip-2", impl.class)
		k.setGatewayClaim("web", "web-ip-2")
		k.patchAnnotations("twin", map[string]string{iadv1alpha1.ServiceClaimAnnotation: "twin-ip-2"})
		k.gatewayAttached("web", b)
		k.attached("twin", twinB)
		k.held(a, iadv1alpha1.AddressBound)
		k.held(twin, iadv1alpha1.AddressBound)

		k.setGatewayClaim("web", "")
		k.unannotate("twin")
		k.held(b, iadv1alpha1.AddressBound)
		k.held(twinB, iadv1alpha1.AddressBound)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Empty(c, ingress(k.gatewayService(c, "web")), "the Gateway's Service has no address once detached")
			if !impl.keepsAddresses {
				assert.Empty(c, gatewayIPs(k.readGateway(c, "web")), "the Gateway has no address once its Service is detached")
			}
		}, wait, tick)

		k.setGatewayClaim("web", "web-ip-2")
		k.patchAnnotations("twin", map[string]string{iadv1alpha1.ServiceClaimAnnotation: "twin-ip-2"})
		k.gatewayAttached("web", b)
		k.attached("twin", twinB)
		// Nothing so far provoked a Warning; the claims' deletion below
		// does, alike for both (the annotation names a claim that is gone,
		// and MetalLB refuses the release pin until it lets go).
		k.noWarnings(nil)
		k.deleteClaim("web-ip-2")
		k.deleteClaim("twin-ip-2")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			for _, name := range []string{svc, "twin"} {
				s := k.readService(c, name)
				assert.NotContains(c, s.Annotations, marks.KeyPin, "%s is detached once its claim is gone", name)
			}
			gwReasons := k.reasonsAbout(c, "Service", k.ns, svc)
			assert.Contains(c, gwReasons, service.ReasonClaimDeleted)
			assert.Equal(c, k.reasonsAbout(c, "Service", k.ns, "twin"), gwReasons,
				"the Gateway's Service and the plain Service were told the same")
			assert.Contains(c, strings.Join(k.describedGateway(c, "web"), "\n"), service.ReasonClaimDeleted+": Service "+k.ns+"/"+svc)
		}, wait, tick, "the claims' deletion detaches both, with the same Events")

		// 5. The implementation's own writes passed the policy all along;
		// a tenant cannot reach MetalLB's pin or the driver's marks through
		// the Gateway's infrastructure maps.
		policy.assertRefused(t, k.ns, impl.gatewayClass)

		// 6. spec.addresses beside the claim: the tenant is told at
		// admission to drop it. What the implementation makes of both, on
		// a Gateway an administrator (allowlisted) writes, is measured.
		c := k.heldClaim("addr-ip", impl.class)
		err := k.create("addr", "addr-ip", policy.tenant, c.Address)
		require.Error(t, err, "a tenant's Gateway naming a claim and spec.addresses is refused")
		assert.Contains(t, err.Error(), "drop spec.addresses")
		require.NoError(t, k.create("addr", "addr-ip", k.k, c.Address))
		switch impl.addressesTo {
		case "externalIPs":
			svc := k.gatewayAttached("addr", c)
			assert.Contains(t, k.readService(t, svc).Spec.ExternalIPs, c.Address, "spec.addresses became externalIPs")
		case "loadBalancerIP":
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				b, err := os.ReadFile(impl.log())
				require.NoError(c, err)
				assert.Contains(c, string(b), "spec.loadBalancerIP is reserved", "the Service policy refuses the implementation's Service")
			}, wait, tick)
			assert.Empty(t, k.gatewayServices(t, "addr"), "no Service for the Gateway")
		}
		k.deleteGateway("addr")
	})
}

// TestGatewayInImplementationNamespace: where the implementation runs a
// Gateway's Service in its own namespace (Envoy Gateway's default), the
// Service attaches no claim, neither one of the implementation's
// namespace that a tenant names, nor the tenant's own; the Service is told
// why, and so is the Gateway, since the driver runs with that namespace as
// an implementation's (--gateway-implementation-namespaces); the addresses
// stay held.
func TestGatewayInImplementationNamespace(t *testing.T) {
	story(t, "gateway-controller-namespace", "a Gateway whose Service runs in the implementation's namespace attaches no claim", "gateway-shared", func(ctx context.Context, t *testing.T, cfg *envconf.Config, kk *kit) {
		startGateways(ctx, t, cluster.ControllerNamespaceMode)
		// In this mode no owner reference names the Gateway.
		eg := *gatewayImpls()[0]
		eg.owned = false
		k := gatewayOn{kit: kk, impl: &eg}
		k.class("e2e-gateway-shared", iadv1alpha1.ReclaimDelete, "192.0.2.16/28")
		admin := newKit(ctx, t, cfg, cluster.EnvoyGatewayNamespace)
		theirs := admin.heldClaim("shared-ip", "e2e-gateway-shared")
		own := k.heldClaim("own-ip", "e2e-gateway-shared")

		k.gateway("steal", "shared-ip")
		k.gateway("own", "own-ip")
		for _, gw := range []string{"steal", "own"} {
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				svc := k.gatewayService(c, gw)
				assert.Equal(c, cluster.EnvoyGatewayNamespace, svc.Namespace)
				assert.NotContains(c, svc.Annotations, marks.KeyPin)
				k.assertEvent(c, "Service", svc.Namespace, svc.Name, corev1.EventTypeWarning, service.ReasonGatewayInOtherNamespace,
					"serves Gateway "+k.ns+"/"+gw, "a Gateway attaches only a claim of its own namespace")
			}, wait, tick, "Gateway %s's Service is refused, and told why", gw)
			// From an implementation's namespace, the labels naming the
			// Gateway take the Warning to it, where its tenant looks.
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.Contains(c, strings.Join(k.describedGateway(c, gw), "\n"),
					service.ReasonGatewayInOtherNamespace+": Service "+cluster.EnvoyGatewayNamespace+"/")
			}, wait, tick, "Gateway %s/%s is told why it gets no claim", k.ns, gw)
		}
		// A moment later nothing moved: both addresses are held, the
		// Services have none.
		time.Sleep(2 * time.Second)
		admin.held(theirs, iadv1alpha1.AddressBound)
		k.held(own, iadv1alpha1.AddressBound)
		for _, gw := range []string{"steal", "own"} {
			svc := k.gatewayService(t, gw)
			assert.Empty(t, ingress(svc), "Gateway %s's Service has no address", gw)
			assert.Empty(t, gatewayIPs(k.readGateway(t, gw)))
			k.deleteGateway(gw)
		}
		admin.deleteClaim("shared-ip")
	})
}

// claimPhase is the claim's phase now.
func (k *kit) claimPhase(name string) iadv1alpha1.IPAddressClaimPhase {
	c := &iadv1alpha1.IPAddressClaim{}
	require.NoError(k.t, k.k.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: name}, c))
	return c.Status.Phase
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// gatewayPolicy is the chart's admission policy where the feature runs,
// and a tenant who may write the namespace's Gateways and nothing else.
type gatewayPolicy struct {
	k      *kit
	tenant client.Client
}

// gatewayTenant is the user the tenant's writes come as (impersonated).
const gatewayTenant = "e2e-gateway-tenant"

// gatewayPolicy installs the chart's admission policies for the kit's
// namespace on the local provider (the chart installed them everywhere on
// the others), and grants the tenant the namespace's Gateways.
func (k *kit) gatewayPolicy(ctx context.Context, cfg *envconf.Config) *gatewayPolicy {
	if local != nil {
		r, err := chartrender.Render(chartrender.Release{},
			`{"admissionPolicy": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "`+k.ns+`"}}}}`)
		require.NoError(k.t, err)
		for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			for _, o := range r.Find(kind) {
				if slices.Contains(servicePolicies, o.GetName()) {
					continue // installed for the whole cluster (installServicePolicies)
				}
				require.NoError(k.t, k.k.Create(ctx, o))
				k.t.Cleanup(func() { _ = k.k.Delete(context.Background(), o) })
			}
		}
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: gatewayTenant},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{marks.GatewayGroup}, Resources: []string{"gateways"}, Verbs: []string{"*"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: gatewayTenant},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: gatewayTenant},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: gatewayTenant}},
	}
	k.create(role)
	k.create(binding)
	rc := rest.CopyConfig(cfg.Client().RESTConfig())
	rc.Impersonate = rest.ImpersonationConfig{UserName: gatewayTenant, Groups: []string{"system:authenticated"}}
	tenant, err := client.New(rc, client.Options{})
	require.NoError(k.t, err)
	return &gatewayPolicy{k: k, tenant: tenant}
}

// assertRefused: the tenant may write a Gateway with the claim annotation,
// and cannot add, on create or update, MetalLB's pin and pool, the sharing
// key, the driver's markers, or the grant label through its
// spec.infrastructure maps.
func (p *gatewayPolicy) assertRefused(t *testing.T, ns, gatewayClass string) {
	gw := func(name string, annotations, labels map[string]string) *unstructured.Unstructured {
		o := gatewayObject(ns, name)
		_ = unstructured.SetNestedField(o.Object, gatewayClass, "spec", "gatewayClassName")
		_ = unstructured.SetNestedSlice(o.Object, []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}, "spec", "listeners")
		if annotations != nil {
			_ = unstructured.SetNestedStringMap(o.Object, annotations, "spec", "infrastructure", "annotations")
		}
		if labels != nil {
			_ = unstructured.SetNestedStringMap(o.Object, labels, "spec", "infrastructure", "labels")
		}
		return o
	}
	claimOnly := gw("tenant-gw", map[string]string{iadv1alpha1.ServiceClaimAnnotation: "web-ip"}, nil)
	require.NoError(t, p.tenant.Create(p.k.ctx, claimOnly), "the tenant may write a Gateway naming a claim")

	for _, key := range []string{marks.KeyPin, marks.KeyPool, marks.KeySharing, marks.KeyPinnedBy, marks.KeySharedBy} {
		err := p.tenant.Create(p.k.ctx, gw("sneaky", map[string]string{key: "192.0.2.1"}, nil))
		require.Error(t, err, "a Gateway carrying %s in spec.infrastructure.annotations is refused", key)
		assert.Contains(t, err.Error(), "spec.infrastructure.annotations["+key+"] is reserved")

		patch := map[string]any{"spec": map[string]any{"infrastructure": map[string]any{"annotations": map[string]any{key: "192.0.2.1"}}}}
		err = p.tenant.Patch(p.k.ctx, gatewayObject(ns, "tenant-gw"), client.RawPatch(types.MergePatchType, mustJSON(t, patch)))
		require.Error(t, err, "adding %s to a Gateway's spec.infrastructure.annotations is refused", key)
		assert.Contains(t, err.Error(), "is reserved")
	}
	err := p.tenant.Create(p.k.ctx, gw("sneaky", nil, map[string]string{marks.LabelGrant: "e2e-gateway"}))
	require.Error(t, err, "a Gateway carrying the grant label in spec.infrastructure.labels is refused")
	assert.Contains(t, err.Error(), "spec.infrastructure.labels["+marks.LabelGrant+"] is reserved")
	for _, key := range []string{marks.LabelOwningGatewayName, marks.LabelOwningGatewayNamespace, "gateway.networking.k8s.io/gateway-name"} {
		err := p.tenant.Create(p.k.ctx, gw("sneaky", nil, map[string]string{key: "prod"}))
		require.Error(t, err, "a Gateway carrying the implementation's label %s in spec.infrastructure.labels is refused", key)
		assert.Contains(t, err.Error(), "are reserved to the Gateway's implementation")
	}
	require.NoError(t, p.tenant.Delete(p.k.ctx, claimOnly))
}

func mustJSON(t require.TestingT, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// chartGateways runs Envoy Gateway as a Deployment on the node and kind
// providers (gateways.go).
func chartGateways(ctx context.Context, _ *testing.T, mode cluster.EnvoyGatewayMode) error {
	return charted.runEnvoyGateway(ctx, mode)
}
