package claim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// TestBoundByFamily: the families of a claim left unbound by the
// addresses bound to it (boundByFamily), as a pass scopes them.
func TestBoundByFamily(t *testing.T) {
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
			bound := boundByFamily(c, tt.addrs)
			var unbound []iadv1alpha1.IPFamily
			for _, f := range c.Spec.Family.Families() {
				if len(bound[f]) == 0 {
					unbound = append(unbound, f)
				}
			}
			assert.Equal(t, tt.want, unbound)
		})
	}
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
		{"labelled and pinned, the address not recorded (a crash between the writes): record again", nil, testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), stepRecord},
		{"crash after creating the IPAddress: hand over", []*iadv1alpha1.IPAddress{&mine}, testPlaceholder(alloc, "", "192.0.2.1"), stepHandOver},
		{"crash after creating the IPAddress, labelled already: hand over", []*iadv1alpha1.IPAddress{&mine},
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

func TestUnsettledAddress(t *testing.T) {
	ref := &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "a", UID: "u"}
	with := func(mut func(a *iadv1alpha1.IPAddress)) iadv1alpha1.IPAddress {
		a := testAddress("ip-192-0-2-1", "192.0.2.1", ref)
		mut(&a)
		return a
	}
	held := with(func(a *iadv1alpha1.IPAddress) {
		a.Status.Conditions = []metav1.Condition{{Type: conditions.Held, Status: metav1.ConditionTrue, Reason: conditions.ReasonHeldByPlaceholder}}
	})
	waiting := with(func(a *iadv1alpha1.IPAddress) {
		a.Status.Conditions = []metav1.Condition{{Type: conditions.Held, Status: metav1.ConditionUnknown, Reason: conditions.ReasonWaitingForMetalLB}}
	})
	attached := with(func(a *iadv1alpha1.IPAddress) {
		a.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant", Name: "web"}
	})
	lost := with(func(a *iadv1alpha1.IPAddress) { a.Status.Phase = iadv1alpha1.AddressLost })
	conflict := with(func(a *iadv1alpha1.IPAddress) { a.Status.Phase = iadv1alpha1.AddressConflict })
	going := with(func(a *iadv1alpha1.IPAddress) { a.DeletionTimestamp = ptr.To(metav1.Now()) })
	v6 := testAddress("ip6-x", "2001:db8::1", ref)
	never := func(*iadv1alpha1.IPAddress, string) bool { return false }
	always := func(*iadv1alpha1.IPAddress, string) bool { return true }

	tests := []struct {
		name  string
		addrs []iadv1alpha1.IPAddress
		held  func(*iadv1alpha1.IPAddress, string) bool
		want  string
	}{
		{"no addresses", nil, never, ""},
		{"held", []iadv1alpha1.IPAddress{held}, never, ""},
		{"attached", []iadv1alpha1.IPAddress{attached}, never, ""},
		{"lost: outside the pool, MetalLB cannot hand it out", []iadv1alpha1.IPAddress{lost}, never, ""},
		{"conflict: someone holds it", []iadv1alpha1.IPAddress{conflict}, never, ""},
		{"being deleted", []iadv1alpha1.IPAddress{going}, never, ""},
		{"other family", []iadv1alpha1.IPAddress{v6}, never, ""},
		{"waiting for its hold: unsettled", []iadv1alpha1.IPAddress{held, waiting}, never, "ip-192-0-2-1"},
		{"waiting, but a placeholder of it already holds it", []iadv1alpha1.IPAddress{waiting}, always, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := draw.UnsettledAddress(draw.ViewOf(tt.addrs, "public", iadv1alpha1.FamilyIPv4).Unheld, tt.held)
			if tt.want == "" {
				assert.Nil(t, got)
			} else if assert.NotNil(t, got) {
				assert.Equal(t, tt.want, got.Name)
			}
		})
	}
}

func TestDecideDraw(t *testing.T) {
	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"},
		Spec: iadv1alpha1.IPAddressClassSpec{Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"addresses":["192.0.2.0/30"]}`)}}}
	ref := &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "a", UID: "u"}
	available := testAddress("ip-192-0-2-1", "192.0.2.1", nil)
	available.Status.Phase = iadv1alpha1.AddressAvailable
	bound := testAddress("ip-192-0-2-2", "192.0.2.2", ref)
	held := func(*iadv1alpha1.IPAddress, string) bool { return true }
	unheld := func(*iadv1alpha1.IPAddress, string) bool { return false }
	tests := []struct {
		name            string
		addrs           []iadv1alpha1.IPAddress
		drawn, inflight int
		held            func(*iadv1alpha1.IPAddress, string) bool
		want            drawDecision
	}{
		{"an empty class: draw", nil, 0, 0, unheld, drawDecision{verdict: drawNow}},
		{"an Available address: left to the core", []iadv1alpha1.IPAddress{bound, available}, 0, 0, held,
			drawDecision{verdict: drawLeftToCore, available: "ip-192-0-2-1"}},
		{"the ledger and the draws fill the ranges", []iadv1alpha1.IPAddress{bound}, 3, 0, held,
			drawDecision{verdict: drawClassFull, used: 4, size: 4}},
		{"the ledger and the draws in flight fill the ranges", []iadv1alpha1.IPAddress{bound}, 0, 3, held,
			drawDecision{verdict: drawClassFull, used: 4, size: 4}},
		{"cached draws and draws in flight add up to the ranges", []iadv1alpha1.IPAddress{bound}, 1, 2, held,
			drawDecision{verdict: drawClassFull, used: 4, size: 4}},
		{"an empty class with every address in flight", nil, 0, 4, unheld,
			drawDecision{verdict: drawClassFull, used: 4, size: 4}},
		{"room for one more beside the draws in flight: draw", []iadv1alpha1.IPAddress{bound}, 1, 1, held,
			drawDecision{verdict: drawNow}},
		{"an address of the ledger is unheld", []iadv1alpha1.IPAddress{bound}, 1, 0, unheld,
			drawDecision{verdict: drawLedgerUnsettled, unsettled: &bound}},
		{"every address is held: draw", []iadv1alpha1.IPAddress{bound}, 2, 0, held, drawDecision{verdict: drawNow}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideDraw(class, iadv1alpha1.FamilyIPv4, draw.ViewOf(tt.addrs, "public", iadv1alpha1.FamilyIPv4), tt.drawn, tt.inflight, tt.held)
			if tt.want.unsettled != nil {
				require.NotNil(t, got.unsettled)
				assert.Equal(t, tt.want.unsettled.Name, got.unsettled.Name)
				got.unsettled, tt.want.unsettled = nil, nil
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestAvailableFor(t *testing.T) {
	addr := func(name, ip string, phase iadv1alpha1.IPAddressPhase, bound bool) iadv1alpha1.IPAddress {
		a := iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: iadv1alpha1.IPAddressSpec{Address: ip, ClassName: "public"}, Status: iadv1alpha1.IPAddressStatus{Phase: phase}}
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
			assert.Equal(t, tt.want, availableFor(draw.ViewOf(tt.addrs, "public", tt.family).Available))
		})
	}
}

func TestUnrecorded(t *testing.T) {
	alloc := func(ingress string) corev1.Service {
		return *testPlaceholder(names.PlaceholderAllocation, "", ingress)
	}
	v6 := alloc("")
	v6.Annotations[marks.AnnotationFamily] = string(iadv1alpha1.FamilyIPv6)
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
			assert.Equal(t, tc.want, draw.Unrecorded(tc.phs, iadv1alpha1.FamilyIPv4, draw.ViewOf(ledger, "public", iadv1alpha1.FamilyIPv4).Records))
		})
	}
}
