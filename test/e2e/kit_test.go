package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/parking"
	"github.com/cozystack/metallb-iad/test/cluster"
)

const (
	wait = 60 * time.Second
	tick = 100 * time.Millisecond
)

// kit holds what an assessment needs: a client acting as the admin, the
// tenant namespace of the feature, and the provider's fleet.
type kit struct {
	t     *testing.T
	ctx   context.Context
	k     client.Client
	ns    string
	fleet fleet
	// sharedHandoffRace leaves MetalLB's passing refusal of a shared
	// handoff out of warnings (metallbSharedHandoffRace).
	sharedHandoffRace bool
}

// story runs one feature, name, with one assessment, what, whose body gets
// a kit for the tenant namespace ns.
func story(t *testing.T, name, what, ns string, body func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit)) {
	t.Helper()
	testenv.Test(t, features.New(name).
		Assess(what, func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			body(ctx, t, cfg, newKit(ctx, t, cfg, ns))
			return ctx
		}).Feature())
}

func newKit(ctx context.Context, t *testing.T, cfg *envconf.Config, ns string) *kit {
	k, err := client.New(cfg.Client().RESTConfig(), client.Options{Scheme: bootstrap.Scheme()})
	require.NoError(t, err)
	kt := &kit{t: t, ctx: ctx, k: k, ns: ns}
	if local != nil {
		kt.fleet = localFleet{p: local, k: k}
	} else {
		kt.fleet = kindFleet{k: k}
	}
	err = k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	return kt
}

func (k *kit) class(name string, policy iadv1alpha1.ReclaimPolicy, addresses ...string) {
	params := fmt.Sprintf(`{"addresses":["%s"]}`, strings.Join(addresses, `","`))
	require.NoError(k.t, k.k.Create(k.ctx, cluster.Class(name, policy, params)))
	require.EventuallyWithT(k.t, func(t *assert.CollectT) {
		p := &metallbv1beta1.IPAddressPool{}
		require.NoError(t, k.k.Get(k.ctx, client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: names.PoolName(name)}, p))
		assert.Equal(t, addresses, p.Spec.Addresses)
	}, wait, tick, "the class controller renders pool %s", names.PoolName(name))
}

func (k *kit) claim(name, class string, family iadv1alpha1.IPFamily) *iadv1alpha1.IPAddressClaim {
	c := &iadv1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: name},
		Spec:       iadv1alpha1.IPAddressClaimSpec{ClassName: class, Family: family},
	}
	require.NoError(k.t, k.k.Create(k.ctx, c))
	return c
}

// heldClaim claims one IPv4 address of class as name and waits until the
// claim is Bound and the address held; it returns the address.
func (k *kit) heldClaim(name, class string) iadv1alpha1.ClaimedAddress {
	k.claim(name, class, iadv1alpha1.FamilyIPv4)
	a := k.bound(name)[0]
	k.held(a, iadv1alpha1.AddressBound)
	return a
}

// attachedClaim claims one IPv4 address of class as claim, attaches it to
// a new Service svc and waits until svc has it; it returns the address.
func (k *kit) attachedClaim(claim, class, svc string) iadv1alpha1.ClaimedAddress {
	k.claim(claim, class, iadv1alpha1.FamilyIPv4)
	a := k.bound(claim)[0]
	k.service(svc, claim)
	k.attached(svc, a)
	return a
}

// bound waits until the claim is Bound and returns its addresses (v4 first).
func (k *kit) bound(name string) []iadv1alpha1.ClaimedAddress {
	var out []iadv1alpha1.ClaimedAddress
	require.EventuallyWithT(k.t, func(t *assert.CollectT) {
		c := &iadv1alpha1.IPAddressClaim{}
		require.NoError(t, k.k.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: name}, c))
		require.Equal(t, iadv1alpha1.ClaimBound, c.Status.Phase)
		out = c.Status.Addresses
	}, wait, tick, "claim %s/%s goes Bound", k.ns, name)
	if len(out) == 2 && strings.Contains(out[0].Address, ":") {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

func (k *kit) address(name string) *iadv1alpha1.IPAddress {
	a := &iadv1alpha1.IPAddress{}
	require.NoError(k.t, k.k.Get(k.ctx, client.ObjectKey{Name: name}, a))
	return a
}

// held waits until the address is attached to nothing, Bound (or the given
// phase), and a placeholder in the placeholder namespace holds exactly its IP
// in MetalLB's books.
func (k *kit) held(a iadv1alpha1.ClaimedAddress, phase iadv1alpha1.IPAddressPhase) {
	require.EventuallyWithT(k.t, func(t *assert.CollectT) {
		addr := &iadv1alpha1.IPAddress{}
		require.NoError(t, k.k.Get(k.ctx, client.ObjectKey{Name: a.Name}, addr))
		assert.Nil(t, addr.Status.AssociatedTo)
		assert.Equal(t, phase, addr.Status.Phase)
		list := &corev1.ServiceList{}
		require.NoError(t, k.k.List(k.ctx, list, client.InNamespace(k.fleet.placeholderNamespace()),
			client.MatchingLabels{marks.LabelAddress: a.Name}))
		require.Len(t, list.Items, 1, "exactly one placeholder holds %s", a.Address)
		assert.Equal(t, []string{a.Address}, ingress(&list.Items[0]))
	}, wait, tick, "%s (%s) is held by a placeholder", a.Name, a.Address)
}

func ingress(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// service creates a LoadBalancer Service annotated with a claim.
func (k *kit) service(name, claim string, families ...corev1.IPFamily) {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	if claim != "" {
		s.Annotations = map[string]string{iadv1alpha1.ServiceClaimAnnotation: claim}
	}
	if len(families) > 0 {
		s.Spec.IPFamilies = families
		if len(families) == 2 {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		}
	}
	require.NoError(k.t, k.k.Create(k.ctx, s))
}

// attached waits until the Service holds exactly ips and every address
// names it. In a shared attachment (the Service carries the driver's
// sharing key) the address's hold placeholder keeps holding it beside the
// Service; otherwise the hold waits in the parking pool (the parked
// handoff) or is gone (the gap handoff), and never holds the address.
func (k *kit) attached(svc string, addrs ...iadv1alpha1.ClaimedAddress) {
	var want []string
	for _, a := range addrs {
		want = append(want, a.Address)
	}
	require.EventuallyWithT(k.t, func(t *assert.CollectT) {
		s := &corev1.Service{}
		require.NoError(t, k.k.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: svc}, s))
		assert.Equal(t, want, ingress(s))
		assert.Equal(t, strings.Join(want, ","), s.Annotations[marks.KeyPin])
		for _, a := range addrs {
			addr := &iadv1alpha1.IPAddress{}
			require.NoError(t, k.k.Get(k.ctx, client.ObjectKey{Name: a.Name}, addr))
			require.NotNil(t, addr.Status.AssociatedTo)
			assert.Equal(t, iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: k.ns, Name: svc}, *addr.Status.AssociatedTo)
			assert.Equal(t, iadv1alpha1.AddressBound, addr.Status.Phase)
			list := &corev1.ServiceList{}
			require.NoError(t, k.k.List(k.ctx, list, client.InNamespace(k.fleet.placeholderNamespace()),
				client.MatchingLabels{marks.LabelAddress: a.Name}))
			if _, shared := s.Annotations[marks.KeySharedBy]; !shared {
				assert.LessOrEqual(t, len(list.Items), 1, "at most the parked hold while attached")
				for i := range list.Items {
					assert.Equal(t, parking.DefaultPool, list.Items[i].Annotations[marks.KeyPool], "the hold is parked")
					assert.NotContains(t, ingress(&list.Items[i]), a.Address, "the parked hold does not hold %s", a.Address)
				}
				continue
			}
			if assert.Len(t, list.Items, 1, "the hold placeholder stays in a shared attachment") {
				assert.Equal(t, []string{a.Address}, ingress(&list.Items[0]), "the placeholder shares %s with the Service", a.Address)
			}
		}
	}, wait, tick, "Service %s/%s holds %v", k.ns, svc, want)
}

func (k *kit) deleteService(name string) {
	require.NoError(k.t, k.k.Delete(k.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: name}}))
	require.Eventually(k.t, func() bool {
		return apierrors.IsNotFound(k.k.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: name}, &corev1.Service{}))
	}, wait, tick, "Service %s/%s is gone", k.ns, name)
}

func (k *kit) unannotate(name string) {
	s := &corev1.Service{}
	require.NoError(k.t, k.k.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: name}, s))
	patch := client.MergeFrom(s.DeepCopy())
	delete(s.Annotations, iadv1alpha1.ServiceClaimAnnotation)
	require.NoError(k.t, k.k.Patch(k.ctx, s, patch))
	require.EventuallyWithT(k.t, func(t *assert.CollectT) {
		require.NoError(t, k.k.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: name}, s))
		assert.NotContains(t, s.Annotations, marks.KeyPin)
		assert.NotContains(t, s.Annotations, marks.KeyPinnedBy)
	}, wait, tick, "the pin on %s/%s is withdrawn", k.ns, name)
}

func (k *kit) deleteClaim(name string) {
	require.NoError(k.t, k.k.Delete(k.ctx, &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: name}}))
	require.Eventually(k.t, func() bool {
		return apierrors.IsNotFound(k.k.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: name}, &iadv1alpha1.IPAddressClaim{}))
	}, wait, tick, "claim %s/%s is gone", k.ns, name)
}

// pinnedService creates a plain Service an administrator pinned by hand to
// ip in the class's pool, with the class's grant label (which the admission
// policy reserves to the driver and administrators): the pool admits it,
// so whether it gets the address depends on who holds it.
func (k *kit) pinnedService(name, class, ip string) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: name, Labels: map[string]string{marks.LabelGrant: class},
			Annotations: map[string]string{marks.KeyPin: ip, marks.KeyPool: names.PoolName(class)}},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP}},
		},
	}
	require.NoError(k.t, k.k.Create(k.ctx, s))
	return s
}

func (k *kit) ingressOf(name string) []string {
	s := &corev1.Service{}
	require.NoError(k.t, k.k.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: name}, s))
	return ingress(s)
}

// events returns the messages of Events about the object kind/name with a
// reason (Events of cluster-scoped objects live in "default").
func (k *kit) events(t require.TestingT, kind, name, reason string) []string {
	list := &corev1.EventList{}
	require.NoError(t, k.k.List(k.ctx, list))
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// metallbNoAddressYet is MetalLB's refusal of a Service that asks for no
// address of its own and no pool it can use: a Service created with the
// claim annotation, in the moment before the driver pins it.
const metallbNoAddressYet = "no available IPs"

// metallbSharedHandoffRace is MetalLB's passing refusal of a Service the
// shared handoff pinned right after its hold took the claim's key: MetalLB's
// one queue can look at the pin before the hold's key, which it applies a
// moment later, and then gives the Service the address. The driver reports
// no refusal for it; a story with shared handoffs may set
// kit.sharedHandoffRace to leave it out.
const metallbSharedHandoffRace = "can't change sharing key for"

// warnings counts the Warning Events the driver and MetalLB said about the
// kit's namespace and the cluster-scoped objects named
// ("IPAddress/ip-10-0-0-1", "IPAddressClass/gold"), by "source reason
// kind/name", each as often as it was said. MetalLB's refusal of a fresh
// Service before its pin (metallbNoAddressYet) is left out, and so are the
// Warnings of the control plane's own components (such as the API server
// repairing a cluster IP): neither is the feature's.
func (k *kit) warnings(t require.TestingT, objects ...string) map[string]int {
	list := &corev1.EventList{}
	require.NoError(t, k.k.List(k.ctx, list, client.MatchingFields{"type": corev1.EventTypeWarning}))
	named := map[string]bool{}
	for _, o := range objects {
		named[o] = true
	}
	out := map[string]int{}
	for _, e := range list.Items {
		io := e.InvolvedObject
		if io.Namespace != k.ns && !named[io.Kind+"/"+io.Name] {
			continue
		}
		src := e.Source.Component
		if src == "" {
			src = e.ReportingController
		}
		if !strings.HasPrefix(src, "metallb-") ||
			(src == "metallb-controller" && e.Reason == "AllocationFailed" && strings.Contains(e.Message, metallbNoAddressYet)) ||
			(k.sharedHandoffRace && src == "metallb-controller" && e.Reason == "AllocationFailed" && strings.Contains(e.Message, metallbSharedHandoffRace)) {
			continue
		}
		out[fmt.Sprintf("%s %s %s/%s: %s", src, e.Reason, io.Kind, io.Name, e.Message)] += int(max(e.Count, 1))
	}
	return out
}

// noWarnings fails the test on any Warning about the kit's namespace and
// the objects named (warnings), for a feature that injects no fault, but
// those expected: reasons by "kind/name" of the object, which the story
// provokes on purpose and which must then be said.
func (k *kit) noWarnings(expected map[string]string, objects ...string) {
	k.t.Helper()
	var got map[string]int
	// The provoked Warnings come from the controllers' recorders, after
	// the step that provoked them.
	require.EventuallyWithT(k.t, func(t *assert.CollectT) {
		got = k.warnings(t, objects...)
		for obj, reason := range expected {
			said := false
			for w := range got {
				said = said || strings.Contains(w, " "+reason+" "+obj+": ")
			}
			assert.True(t, said, "the provoked Warning %s on %s is said", reason, obj)
		}
	}, wait, tick)
	for w, n := range got {
		k.t.Logf("Warning x%d: %s", n, w)
		for obj, reason := range expected {
			if strings.Contains(w, " "+reason+" "+obj+": ") {
				delete(got, w)
			}
		}
	}
	assert.Empty(k.t, got, "a feature that injects no fault records no Warning it does not provoke")
}
