package draw

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
	"github.com/cozystack/metallb-iad/test/fixture"
)

func TestReclaimPolicy(t *testing.T) {
	c := &iadv1alpha1.IPAddressClass{}
	assert.Equal(t, iadv1alpha1.ReclaimRetain, reclaimPolicy(c))
	c.Spec.ReclaimPolicy = iadv1alpha1.ReclaimDelete
	assert.Equal(t, iadv1alpha1.ReclaimDelete, reclaimPolicy(c))
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
			svc := RenderPlaceholder("iad-system", c, "public", tt.family)
			assert.Equal(t, "iad-system", svc.Namespace)
			assert.Equal(t, tt.name, svc.Name)
			assert.Empty(t, validation.IsDNS1035Label(svc.Name))
			assert.Equal(t, map[string]string{
				marks.LabelPlaceholder: names.PlaceholderAllocation,
				marks.LabelClaimUID:    string(testUID),
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
	a := RenderAddress(c, class, "192.0.2.7", "ip-192-0-2-7")
	assert.Equal(t, "ip-192-0-2-7", a.Name)
	assert.Equal(t, []string{marks.Finalizer}, a.Finalizers)
	assert.Equal(t, iadv1alpha1.IPAddressSpec{
		Address:       "192.0.2.7",
		ClassName:     "public",
		ReclaimPolicy: iadv1alpha1.ReclaimRetain,
		ClaimRef:      &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: string(testUID)},
		Source:        iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}},
	}, a.Spec)
	assert.Empty(t, a.Status, "the driver never writes a phase")

	class.Spec.ReclaimPolicy = iadv1alpha1.ReclaimDelete
	assert.Equal(t, iadv1alpha1.ReclaimDelete, RenderAddress(c, class, "192.0.2.7", "ip-192-0-2-7").Spec.ReclaimPolicy)
}

func TestAssignedIP(t *testing.T) {
	svc := &corev1.Service{}
	assert.Empty(t, AssignedIP(svc, iadv1alpha1.FamilyIPv4))
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example.org"}, {IP: "2001:DB8:0::7"}}
	assert.Empty(t, AssignedIP(svc, iadv1alpha1.FamilyIPv4))
	assert.Equal(t, "2001:db8::7", AssignedIP(svc, iadv1alpha1.FamilyIPv6), "canonical form")
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}}
	assert.Equal(t, "192.0.2.7", AssignedIP(svc, iadv1alpha1.FamilyIPv4))
}

// testPlaceholder is TenantClaim's IPv4 placeholder as the claim
// controller renders it, marked (fixture.MarkPlaceholder).
func testPlaceholder(role, address, ingress string, owners ...string) *corev1.Service {
	return fixture.MarkPlaceholder(RenderPlaceholder("iad-system", testClaim(iadv1alpha1.FamilyIPv4), "public", iadv1alpha1.FamilyIPv4), role, address, ingress, owners...)
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
		{"still an allocation placeholder", func(ph *corev1.Service) { ph.Labels[marks.LabelPlaceholder] = names.PlaceholderAllocation }, false},
		{"no owner reference", func(ph *corev1.Service) { ph.OwnerReferences = nil }, false},
		{"no grant", func(ph *corev1.Service) { delete(ph.Labels, marks.LabelGrant) }, false},
		{"no pin", func(ph *corev1.Service) { delete(ph.Annotations, marks.KeyPin) }, false},
		{"labelled for another address", func(ph *corev1.Service) { ph.Labels[marks.LabelAddress] = "ip-192-0-2-7" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ph := done()
			tt.change(ph)
			assert.Equal(t, tt.want, HandedOver(ph, &mine, "192.0.2.1", "public"))
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
	assert.True(t, placeholder.OwnedByAddress(svc, "ip-192-0-2-1"))
	assert.True(t, placeholder.OwnedByAddress(svc, ""))
	assert.False(t, placeholder.OwnedByAddress(svc, "ip-192-0-2-2"))
}

func TestLedgerVerdict(t *testing.T) {
	c := testClaim(iadv1alpha1.FamilyIPv4)
	mine := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: string(testUID)})
	mineNoUID := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web"})
	other := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "db", UID: "x"})
	stale := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: "an-earlier-claim"})
	unbound := testAddress("static-one", "192.0.2.1", nil)
	going := other
	going.DeletionTimestamp = ptr.To(metav1.Now())

	tests := []struct {
		name    string
		entries []iadv1alpha1.IPAddress
		want    LedgerAnswer
		entry   string
	}{
		{"no entry: record", nil, LedgerFree, ""},
		{"entry bound to this claim: finish recording", []iadv1alpha1.IPAddress{mine}, LedgerOurs, "ip-192-0-2-1"},
		{"entry bound to this claim, uid not filled in yet", []iadv1alpha1.IPAddress{mineNoUID}, LedgerOurs, "ip-192-0-2-1"},
		{"entry of another claim: give back", []iadv1alpha1.IPAddress{other}, LedgerTaken, "ip-192-0-2-1"},
		{"entry of an earlier claim of the same name: give back", []iadv1alpha1.IPAddress{stale}, LedgerTaken, "ip-192-0-2-1"},
		{"unbound entry under another name: give back", []iadv1alpha1.IPAddress{unbound}, LedgerTaken, "static-one"},
		{"entry being deleted: wait", []iadv1alpha1.IPAddress{going}, LedgerGoing, "ip-192-0-2-1"},
		{"a live entry beats one being deleted", []iadv1alpha1.IPAddress{going, unbound}, LedgerTaken, "static-one"},
		{"ours beats the others", []iadv1alpha1.IPAddress{unbound, mine}, LedgerOurs, "ip-192-0-2-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, entry := LedgerVerdict(tt.entries, c)
			assert.Equal(t, tt.want, got)
			if tt.entry == "" {
				assert.Nil(t, entry)
			} else if assert.NotNil(t, entry) {
				assert.Equal(t, tt.entry, entry.Name)
			}
		})
	}
}

// The shared claim and addresses of the plan tests (test/fixture).
var (
	testUID     = fixture.ClaimUID
	testClaim   = fixture.TenantClaim
	testAddress = fixture.ClassAddress
)
