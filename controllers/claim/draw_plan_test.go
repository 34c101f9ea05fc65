package claim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

const testUID = types.UID("3f6d3c38-5a0e-4a8c-9d2a-0d4b0c7e1f20")

func testClaim(family iadv1alpha1.IPFamily) *iadv1alpha1.IPAddressClaim {
	return &iadv1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   "tenant",
			Name:        "web",
			UID:         testUID,
			Annotations: map[string]string{iadv1alpha1.ProvisionerAnnotation: names.Provisioner},
		},
		Spec: iadv1alpha1.IPAddressClaimSpec{ClassName: "public", Family: family},
	}
}

func testAddress(name, ip string, ref *iadv1alpha1.ClaimReference) iadv1alpha1.IPAddress {
	return iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec:       iadv1alpha1.IPAddressSpec{Address: ip, ClassName: "public", ClaimRef: ref},
	}
}

func TestServed(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name   string
		mutate func(c *iadv1alpha1.IPAddressClaim)
		want   bool
	}{
		{"stamped for us", func(*iadv1alpha1.IPAddressClaim) {}, true},
		{"no stamp", func(c *iadv1alpha1.IPAddressClaim) { c.Annotations = nil }, false},
		{"another provisioner", func(c *iadv1alpha1.IPAddressClaim) {
			c.Annotations[iadv1alpha1.ProvisionerAnnotation] = "other.example.org"
		}, false},
		{"being deleted", func(c *iadv1alpha1.IPAddressClaim) { c.DeletionTimestamp = &now }, false},
		{"asks for a named address", func(c *iadv1alpha1.IPAddressClaim) { c.Spec.AddressName = "ip-192-0-2-1" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testClaim(iadv1alpha1.FamilyIPv4)
			tt.mutate(c)
			assert.Equal(t, tt.want, served(c))
		})
	}
}

func TestClassName(t *testing.T) {
	c := testClaim(iadv1alpha1.FamilyIPv4)
	assert.Equal(t, "public", className(c), "spec when status is empty")
	c.Status.ClassName = "resolved"
	assert.Equal(t, "public", className(c), "spec wins, as in the core: a claim retargeted before binding names its new class")
	c.Spec.ClassName = ""
	assert.Equal(t, "resolved", className(c), "the sticky status when the spec names none (the default class)")
	c.Spec.ClassName, c.Status.ClassName = "", ""
	assert.Equal(t, "", className(c), "never resolves a default itself")
}

func TestRetargeted(t *testing.T) {
	ph := func(mut func(s *corev1.Service)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{names.LabelPlaceholder: names.PlaceholderAllocation},
			Annotations: map[string]string{names.AnnotationClass: "old"},
		}}
		mut(s)
		return s
	}
	same := func(*corev1.Service) {}
	tests := []struct {
		name  string
		ph    *corev1.Service
		class string
		want  bool
	}{
		{"no placeholder", nil, "new", false},
		{"drawing for the class the claim names", ph(same), "old", false},
		{"drawing for another class", ph(same), "new", true},
		{"the claim is no longer ours", ph(same), "", true},
		{"handed over to an address already", ph(func(s *corev1.Service) { s.Labels[names.LabelAddress] = "ip-192-0-2-1" }), "new", false},
		{"a hold placeholder", ph(func(s *corev1.Service) { s.Labels[names.LabelPlaceholder] = names.PlaceholderHold }), "new", false},
		{"being deleted", ph(func(s *corev1.Service) { s.DeletionTimestamp = &metav1.Time{} }), "new", false},
		{"no class recorded yet (an older driver's): observe records it", ph(func(s *corev1.Service) { delete(s.Annotations, names.AnnotationClass) }), "new", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, retargeted(tt.ph, tt.class))
		})
	}
}

func TestClassProblem(t *testing.T) {
	ours := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"},
		Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: names.Provisioner}}
	theirs := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "cloud"},
		Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: "cloud.example.org"}}
	assert.Empty(t, classProblem("public", ours))
	assert.Equal(t, `IPAddressClass "cloud" is served by provisioner "cloud.example.org", not by metallb.drivers.local.sdn.cozystack.io; this driver does not provision it`,
		classProblem("cloud", theirs))
	assert.Equal(t, `IPAddressClass "gone" does not exist; the claim waits until it is created`, classProblem("gone", nil))
}

func TestReclaimPolicy(t *testing.T) {
	c := &iadv1alpha1.IPAddressClass{}
	assert.Equal(t, iadv1alpha1.ReclaimRetain, reclaimPolicy(c))
	c.Spec.ReclaimPolicy = iadv1alpha1.ReclaimDelete
	assert.Equal(t, iadv1alpha1.ReclaimDelete, reclaimPolicy(c))
}

func TestMissingFamilies(t *testing.T) {
	ref := &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: string(testUID)}
	noUID := &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web"}
	staleUID := &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: "an-older-claim"}
	other := &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "db", UID: "x"}
	v4 := testAddress("ip-192-0-2-1", "192.0.2.1", ref)
	v6 := testAddress("ip6-2001-0db8-0000-0000-0000-0000-0000-0001", "2001:db8::1", ref)

	tests := []struct {
		name   string
		family iadv1alpha1.IPFamily
		addrs  []iadv1alpha1.IPAddress
		want   []iadv1alpha1.IPFamily
	}{
		{"v4, nothing bound", iadv1alpha1.FamilyIPv4, nil, []iadv1alpha1.IPFamily{"IPv4"}},
		{"empty family means IPv4", "", nil, []iadv1alpha1.IPFamily{"IPv4"}},
		{"v4 bound", iadv1alpha1.FamilyIPv4, []iadv1alpha1.IPAddress{v4}, nil},
		{"v4 bound, uid not filled in yet", iadv1alpha1.FamilyIPv4,
			[]iadv1alpha1.IPAddress{testAddress("a", "192.0.2.2", noUID)}, nil},
		{"v4 bound with a stale uid does not count", iadv1alpha1.FamilyIPv4,
			[]iadv1alpha1.IPAddress{testAddress("a", "192.0.2.2", staleUID)}, []iadv1alpha1.IPFamily{"IPv4"}},
		{"another claim's address does not count", iadv1alpha1.FamilyIPv4,
			[]iadv1alpha1.IPAddress{testAddress("a", "192.0.2.2", other)}, []iadv1alpha1.IPFamily{"IPv4"}},
		{"v6 wanted, only v4 bound", iadv1alpha1.FamilyIPv6, []iadv1alpha1.IPAddress{v4}, []iadv1alpha1.IPFamily{"IPv6"}},
		{"v6 bound", iadv1alpha1.FamilyIPv6, []iadv1alpha1.IPAddress{v6}, nil},
		{"dual, nothing bound", iadv1alpha1.FamilyDual, nil, []iadv1alpha1.IPFamily{"IPv4", "IPv6"}},
		{"dual, v4 bound", iadv1alpha1.FamilyDual, []iadv1alpha1.IPAddress{v4}, []iadv1alpha1.IPFamily{"IPv6"}},
		{"dual, v6 bound", iadv1alpha1.FamilyDual, []iadv1alpha1.IPAddress{v6}, []iadv1alpha1.IPFamily{"IPv4"}},
		{"dual, both bound", iadv1alpha1.FamilyDual, []iadv1alpha1.IPAddress{v6, v4}, nil},
		{"unparsable address does not count", iadv1alpha1.FamilyIPv4,
			[]iadv1alpha1.IPAddress{testAddress("a", "not-an-ip", ref)}, []iadv1alpha1.IPFamily{"IPv4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testClaim(tt.family)
			assert.Equal(t, tt.want, missingFamilies(c, boundByFamily(c, tt.addrs)))
		})
	}
}

func TestRenderPlaceholder(t *testing.T) {
	c := testClaim(iadv1alpha1.FamilyDual)
	for _, tt := range []struct {
		family iadv1alpha1.IPFamily
		name   string
		k8s    corev1.IPFamily
	}{
		{iadv1alpha1.FamilyIPv4, "alloc-ipv4-" + string(testUID), corev1.IPv4Protocol},
		{iadv1alpha1.FamilyIPv6, "alloc-ipv6-" + string(testUID), corev1.IPv6Protocol},
	} {
		t.Run(string(tt.family), func(t *testing.T) {
			svc := renderPlaceholder("iad-system", c, "public", tt.family)
			assert.Equal(t, "iad-system", svc.Namespace)
			assert.Equal(t, tt.name, svc.Name)
			assert.Empty(t, validation.IsDNS1035Label(svc.Name))
			assert.Equal(t, map[string]string{
				names.LabelPlaceholder: names.PlaceholderAllocation,
				names.LabelClaimUID:    string(testUID),
				marks.LabelGrant:       "public",
			}, svc.Labels)
			assert.Equal(t, map[string]string{
				"metallb.io/address-pool":                                "iad-public",
				"metallb.drivers.local.sdn.cozystack.io/claim-namespace": "tenant",
				"metallb.drivers.local.sdn.cozystack.io/claim-name":      "web",
				"metallb.drivers.local.sdn.cozystack.io/family":          string(tt.family),
				"metallb.drivers.local.sdn.cozystack.io/class":           "public",
			}, svc.Annotations)
			assert.Empty(t, svc.OwnerReferences)
			assert.Nil(t, svc.Spec.Selector, "selectorless: never any endpoints")
			assert.Equal(t, corev1.ServiceTypeLoadBalancer, svc.Spec.Type)
			assert.Equal(t, ptr.To(false), svc.Spec.AllocateLoadBalancerNodePorts)
			assert.Equal(t, []corev1.IPFamily{tt.k8s}, svc.Spec.IPFamilies)
			assert.Equal(t, ptr.To(corev1.IPFamilyPolicySingleStack), svc.Spec.IPFamilyPolicy)
			require.Len(t, svc.Spec.Ports, 1)
			assert.Equal(t, "hold", svc.Spec.Ports[0].Name)
			assert.Equal(t, int32(9), svc.Spec.Ports[0].Port)
			assert.Equal(t, corev1.ProtocolTCP, svc.Spec.Ports[0].Protocol)
			assert.Empty(t, svc.Annotations[marks.KeyPin], "not pinned before MetalLB assigns")
		})
	}
}

func TestRenderAddress(t *testing.T) {
	c := testClaim(iadv1alpha1.FamilyIPv4)
	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"}}
	a := renderAddress(c, class, "192.0.2.7", "ip-192-0-2-7")
	assert.Equal(t, "ip-192-0-2-7", a.Name)
	assert.Equal(t, []string{names.Finalizer}, a.Finalizers)
	assert.Equal(t, iadv1alpha1.IPAddressSpec{
		Address:       "192.0.2.7",
		ClassName:     "public",
		ReclaimPolicy: iadv1alpha1.ReclaimRetain,
		ClaimRef:      &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: string(testUID)},
		Source:        iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}},
	}, a.Spec)
	assert.Empty(t, a.Status, "the driver never writes a phase")

	class.Spec.ReclaimPolicy = iadv1alpha1.ReclaimDelete
	assert.Equal(t, iadv1alpha1.ReclaimDelete, renderAddress(c, class, "192.0.2.7", "ip-192-0-2-7").Spec.ReclaimPolicy)
}

func TestAssignedIP(t *testing.T) {
	svc := &corev1.Service{}
	assert.Empty(t, assignedIP(svc, iadv1alpha1.FamilyIPv4))
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example.org"}, {IP: "2001:DB8:0::7"}}
	assert.Empty(t, assignedIP(svc, iadv1alpha1.FamilyIPv4))
	assert.Equal(t, "2001:db8::7", assignedIP(svc, iadv1alpha1.FamilyIPv6), "canonical form")
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}}
	assert.Equal(t, "192.0.2.7", assignedIP(svc, iadv1alpha1.FamilyIPv4))
}

// testPlaceholder builds an allocation placeholder in a given state.
func testPlaceholder(role, address string, ingress string, owners ...string) *corev1.Service {
	svc := renderPlaceholder("iad-system", testClaim(iadv1alpha1.FamilyIPv4), "public", iadv1alpha1.FamilyIPv4)
	svc.Labels[names.LabelPlaceholder] = role
	if address != "" {
		svc.Labels[names.LabelAddress] = address
	}
	if ingress != "" {
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ingress}}
	}
	for _, o := range owners {
		a := testAddress(o, "192.0.2.1", nil)
		svc.OwnerReferences = append(svc.OwnerReferences, placeholder.OwnerRef(&a))
	}
	return svc
}

func TestPlanFamily(t *testing.T) {
	ref := &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: string(testUID)}
	mine := testAddress("ip-192-0-2-1", "192.0.2.1", ref)
	matched := testAddress("ip-192-0-2-9", "192.0.2.9", ref)
	const alloc, hold = names.PlaceholderAllocation, names.PlaceholderHold

	tests := []struct {
		name  string
		bound []*iadv1alpha1.IPAddress
		ph    *corev1.Service
		want  step
	}{
		{"nothing yet: reserve", nil, nil, stepCreatePlaceholder},
		{"placeholder without an address: wait for MetalLB", nil, testPlaceholder(alloc, "", ""), stepWaitForMetalLB},
		{"placeholder with an IPv6 address only: still waiting for IPv4", nil, testPlaceholder(alloc, "", "2001:db8::1"), stepWaitForMetalLB},
		{"placeholder assigned: record", nil, testPlaceholder(alloc, "", "192.0.2.1"), stepRecord},
		{"labelled and pinned by an older driver: record again", nil, testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), stepRecord},
		{"crash after creating the IPAddress: hand over", []*iadv1alpha1.IPAddress{&mine}, testPlaceholder(alloc, "", "192.0.2.1"), stepHandOver},
		{"crash after creating the IPAddress, older driver's label: hand over", []*iadv1alpha1.IPAddress{&mine},
			testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), stepHandOver},
		{"unlabelled, bound address of another IP: drop", []*iadv1alpha1.IPAddress{&matched},
			testPlaceholder(alloc, "", "192.0.2.1"), stepDropSurplus},
		{"labelled for another address than the bound one with its IP: drop", []*iadv1alpha1.IPAddress{&mine},
			testPlaceholder(alloc, "ip-192-0-2-7", "192.0.2.1"), stepDropSurplus},
		{"crash after adding the owner reference only: hand over", []*iadv1alpha1.IPAddress{&mine},
			testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1", "ip-192-0-2-1"), stepHandOver},
		{"handed over: done", []*iadv1alpha1.IPAddress{&mine}, testPlaceholder(hold, "ip-192-0-2-1", "192.0.2.1", "ip-192-0-2-1"), stepNone},
		{"bound, placeholder gone (associated): done", []*iadv1alpha1.IPAddress{&mine}, nil, stepNone},
		{"core matched another address meanwhile: drop the placeholder", []*iadv1alpha1.IPAddress{&matched},
			testPlaceholder(alloc, "", "192.0.2.1"), stepDropSurplus},
		{"core matched another address after pinning: drop the placeholder", []*iadv1alpha1.IPAddress{&matched},
			testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), stepDropSurplus},
		{"name held by a hold placeholder of an address not ours: wait", nil,
			testPlaceholder(hold, "ip-192-0-2-1", "192.0.2.1", "ip-192-0-2-1"), stepWaitForName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, planFamily(iadv1alpha1.FamilyIPv4, tt.bound, tt.ph))
		})
	}
}

func TestHandedOver(t *testing.T) {
	ref := &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: string(testUID)}
	mine := testAddress("ip-192-0-2-1", "192.0.2.1", ref)
	done := func() *corev1.Service {
		ph := testPlaceholder(names.PlaceholderHold, "ip-192-0-2-1", "192.0.2.1", "ip-192-0-2-1")
		ph.Labels[marks.LabelGrant] = "public"
		ph.Annotations[marks.KeyPin] = "192.0.2.1"
		return ph
	}
	tests := []struct {
		name   string
		change func(*corev1.Service)
		want   bool
	}{
		{"label, owner, grant and pin", func(*corev1.Service) {}, true},
		{"still an allocation placeholder", func(ph *corev1.Service) { ph.Labels[names.LabelPlaceholder] = names.PlaceholderAllocation }, false},
		{"no owner reference", func(ph *corev1.Service) { ph.OwnerReferences = nil }, false},
		{"no grant", func(ph *corev1.Service) { delete(ph.Labels, marks.LabelGrant) }, false},
		{"no pin", func(ph *corev1.Service) { delete(ph.Annotations, marks.KeyPin) }, false},
		{"labelled for another address", func(ph *corev1.Service) { ph.Labels[names.LabelAddress] = "ip-192-0-2-7" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ph := done()
			tt.change(ph)
			assert.Equal(t, tt.want, handedOver(ph, &mine, "192.0.2.1", "public"))
		})
	}
}

func TestIsOrphan(t *testing.T) {
	const alloc, hold = names.PlaceholderAllocation, names.PlaceholderHold
	live := testClaim(iadv1alpha1.FamilyIPv4)
	replaced := testClaim(iadv1alpha1.FamilyIPv4)
	replaced.UID = "a-newer-claim"
	backing := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: string(testUID)})
	backingNoUID := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web"})
	someoneElses := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "db", UID: "x"})
	unbound := testAddress("ip-192-0-2-1", "192.0.2.1", nil)
	otherName := testAddress("ip-192-0-2-2", "192.0.2.2", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: string(testUID)})

	tests := []struct {
		name  string
		ph    *corev1.Service
		claim *iadv1alpha1.IPAddressClaim
		addr  *iadv1alpha1.IPAddress
		want  bool
	}{
		{"claim live", testPlaceholder(alloc, "", ""), live, nil, false},
		{"claim live, recorded half-way", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), live, nil, false},
		{"claim gone, nothing recorded", testPlaceholder(alloc, "", ""), nil, nil, true},
		{"claim gone, labelled but no IPAddress", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), nil, nil, true},
		{"claim replaced by another of the same name", testPlaceholder(alloc, "", "192.0.2.1"), replaced, nil, true},
		{"claim gone, backs its IPAddress", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), nil, &backing, false},
		{"claim gone, backs its IPAddress (uid not filled in)", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), nil, &backingNoUID, false},
		{"claim gone, owner-referenced to an IPAddress", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1", "ip-192-0-2-1"), nil, nil, false},
		{"claim gone, the IPAddress is someone else's", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), nil, &someoneElses, true},
		{"claim gone, the IPAddress is unbound", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), nil, &unbound, true},
		{"claim gone, an IPAddress of another name", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), nil, &otherName, true},
		{"hold placeholders are the IPAddress controller's", testPlaceholder(hold, "ip-192-0-2-1", "192.0.2.1"), nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, isOrphan(tt.ph, tt.claim, tt.addr))
		})
	}
}

func TestOwnerRef(t *testing.T) {
	a := testAddress("ip-192-0-2-1", "192.0.2.1", nil)
	ref := placeholder.OwnerRef(&a)
	assert.Equal(t, metav1.OwnerReference{
		APIVersion: "local.sdn.cozystack.io/v1alpha1", Kind: "IPAddress", Name: "ip-192-0-2-1", UID: "uid-ip-192-0-2-1",
		Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false),
	}, ref)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{ref}}}
	assert.True(t, ownedByAddress(svc, "ip-192-0-2-1"))
	assert.True(t, ownedByAddress(svc, ""))
	assert.False(t, ownedByAddress(svc, "ip-192-0-2-2"))
}

func TestEventMessages(t *testing.T) {
	assert.Equal(t, "Waiting for MetalLB to assign an IPv4 address from pool iad-public (class public)",
		msgWaitingForMetalLB(iadv1alpha1.FamilyIPv4, "public"))
	assert.Equal(t, "Recorded IPv6 address 2001:db8::7 as IPAddress ip6-2001-0db8-0000-0000-0000-0000-0000-0007",
		msgRecorded(iadv1alpha1.FamilyIPv6, "2001:db8::7", "ip6-2001-0db8-0000-0000-0000-0000-0000-0007"))

	other := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "team-b", Name: "db", UID: "u-1"})
	assert.Equal(t, "MetalLB assigned IPv4 address 192.0.2.1 to this claim, but IPAddress ip-192-0-2-1 already exists and "+
		"is bound to claim team-b/db (uid u-1); MetalLB and the ledger disagree, so the driver leaves both alone for an administrator to resolve",
		msgLedgerMismatch(iadv1alpha1.FamilyIPv4, "192.0.2.1", &other))
	free := testAddress("ip-192-0-2-1", "192.0.2.1", nil)
	free.Status.Phase = iadv1alpha1.AddressAvailable
	assert.Contains(t, msgLedgerMismatch(iadv1alpha1.FamilyIPv4, "192.0.2.1", &free), "already exists and is bound to no claim (Available)")
	noUID := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "team-b", Name: "db"})
	assert.Contains(t, msgLedgerMismatch(iadv1alpha1.FamilyIPv4, "192.0.2.1", &noUID), "is bound to claim team-b/db;")
}

func TestAllocationFailure(t *testing.T) {
	tests := []struct {
		name, metallb, reason, message string
	}{
		{
			name:    "exhausted",
			metallb: `Failed to allocate IP for "iad-system/alloc-ipv4-x": no available IPs`,
			reason:  ReasonPoolExhausted,
			message: "MetalLB has no free IPv4 address in pool iad-public (class public): the pool is exhausted or has no IPv4 range. " +
				`The claim stays Pending and proceeds as soon as an address is freed. MetalLB said: Failed to allocate IP for "iad-system/alloc-ipv4-x": no available IPs`,
		},
		{
			name:    "unknown pool",
			metallb: `Failed to allocate IP for "iad-system/alloc-ipv4-x": unknown pool "iad-public"`,
			reason:  ReasonPoolNotReady,
			message: "MetalLB does not know pool iad-public (class public) yet, so it cannot assign an IPv4 address; " +
				`the claim proceeds once the pool is rendered. MetalLB said: Failed to allocate IP for "iad-system/alloc-ipv4-x": unknown pool "iad-public"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, message := allocationFailure(iadv1alpha1.FamilyIPv4, "public", tt.metallb)
			assert.Equal(t, tt.reason, reason)
			assert.Equal(t, tt.message, message)
		})
	}
}

func TestPendingGauge(t *testing.T) {
	var p pendingClaims
	a := types.NamespacedName{Namespace: "t", Name: "a"}
	b := types.NamespacedName{Namespace: "t", Name: "b"}
	p.set(a, "gauge-x", true)
	p.set(a, "gauge-x", true)
	p.set(b, "gauge-x", true)
	assert.Equal(t, 2, p.count["gauge-x"])
	p.set(a, "gauge-y", true) // retargeted
	assert.Equal(t, 1, p.count["gauge-x"])
	assert.Equal(t, 1, p.count["gauge-y"])
	p.set(b, "gauge-x", false)
	p.forget(a)
	assert.Equal(t, 0, p.count["gauge-x"])
	assert.Equal(t, 0, p.count["gauge-y"])
}

func TestAvailableFor(t *testing.T) {
	addr := func(name, ip string, phase iadv1alpha1.IPAddressPhase, bound bool) iadv1alpha1.IPAddress {
		a := iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: iadv1alpha1.IPAddressSpec{Address: ip}, Status: iadv1alpha1.IPAddressStatus{Phase: phase}}
		if bound {
			a.Spec.ClaimRef = &iadv1alpha1.ClaimReference{Namespace: "t", Name: "other"}
		}
		return a
	}
	tests := []struct {
		name   string
		addrs  []iadv1alpha1.IPAddress
		family iadv1alpha1.IPFamily
		want   string
	}{
		{"none", nil, iadv1alpha1.FamilyIPv4, ""},
		{"available v4", []iadv1alpha1.IPAddress{addr("a", "192.0.2.1", iadv1alpha1.AddressAvailable, false)}, iadv1alpha1.FamilyIPv4, "a"},
		{"available v4, asking v6", []iadv1alpha1.IPAddress{addr("a", "192.0.2.1", iadv1alpha1.AddressAvailable, false)}, iadv1alpha1.FamilyIPv6, ""},
		{"available v6", []iadv1alpha1.IPAddress{addr("b", "2001:db8::1", iadv1alpha1.AddressAvailable, false)}, iadv1alpha1.FamilyIPv6, "b"},
		{"bound", []iadv1alpha1.IPAddress{addr("a", "192.0.2.1", iadv1alpha1.AddressBound, true)}, iadv1alpha1.FamilyIPv4, ""},
		{"released keeps its claimRef", []iadv1alpha1.IPAddress{addr("a", "192.0.2.1", iadv1alpha1.AddressReleased, true)}, iadv1alpha1.FamilyIPv4, ""},
		{"conflict", []iadv1alpha1.IPAddress{addr("a", "192.0.2.1", iadv1alpha1.AddressConflict, false)}, iadv1alpha1.FamilyIPv4, ""},
		{"phase not yet set", []iadv1alpha1.IPAddress{addr("a", "192.0.2.1", "", false)}, iadv1alpha1.FamilyIPv4, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, availableFor(tt.addrs, tt.family))
		})
	}
}

func TestUnrecorded(t *testing.T) {
	alloc := func(ingress string) corev1.Service {
		return *testPlaceholder(names.PlaceholderAllocation, "", ingress)
	}
	v6 := alloc("")
	v6.Annotations[names.AnnotationFamily] = string(iadv1alpha1.FamilyIPv6)
	ledger := []iadv1alpha1.IPAddress{testAddress("ip-192-0-2-1", "192.0.2.1", nil), testAddress("ip-192-0-2-2", "192.0.2.2", nil)}
	for _, tc := range []struct {
		name string
		phs  []corev1.Service
		want int
	}{
		{"none", nil, 0},
		{"not answered by MetalLB yet", []corev1.Service{alloc(""), alloc("")}, 2},
		{"answered, not recorded yet", []corev1.Service{alloc("192.0.2.9")}, 1},
		{"answered and recorded, not handed over yet", []corev1.Service{alloc("192.0.2.1")}, 0},
		{"two answered with one address count once", []corev1.Service{alloc("192.0.2.9"), alloc("192.0.2.9")}, 1},
		{"another family", []corev1.Service{v6}, 0},
		{"all of it", []corev1.Service{alloc(""), alloc("192.0.2.2"), alloc("192.0.2.8"), v6}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, unrecorded(tc.phs, iadv1alpha1.FamilyIPv4, ledger))
		})
	}
}
