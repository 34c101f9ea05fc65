package claim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
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
