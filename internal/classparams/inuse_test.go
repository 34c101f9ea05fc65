package classparams

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

func TestContains(t *testing.T) {
	r := PoolRanges([]string{"192.0.2.0/30", "192.0.2.10-192.0.2.12", "2001:db8::/126"})
	for ip, want := range map[string]bool{
		"192.0.2.0": true, "192.0.2.3": true, "192.0.2.4": false, "192.0.2.12": true, "192.0.2.13": false,
		"2001:db8::3": true, "2001:db8::4": false, "::ffff:192.0.2.1": true,
	} {
		assert.Equal(t, want, Contains(r, netip.MustParseAddr(ip)), ip)
	}
}

func TestDropped(t *testing.T) {
	addr := func(name, ip string, mut ...func(*iadv1alpha1.IPAddress)) iadv1alpha1.IPAddress {
		a := iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: iadv1alpha1.IPAddressSpec{Address: ip, ClassName: "gold"}}
		for _, m := range mut {
			m(&a)
		}
		return a
	}
	going := func(a *iadv1alpha1.IPAddress) { a.DeletionTimestamp = ptr.To(metav1.Now()) }
	addrs := []iadv1alpha1.IPAddress{
		addr("ip-192-0-2-2", "192.0.2.2"),
		addr("ip-192-0-2-1", "192.0.2.1"),
		addr("ip-192-0-2-3", "192.0.2.3", going),
		addr("ip-198-51-100-1", "198.51.100.1"), // never in the rendered pool
		addr("bad", "not-an-ip"),
	}
	rendered := PoolRanges([]string{"192.0.2.0/30"})

	var got []string
	for _, a := range Dropped(addrs, rendered, PoolRanges([]string{"192.0.2.2/31"})) {
		got = append(got, a.Name)
	}
	assert.Equal(t, []string{"ip-192-0-2-1"}, got, "only live addresses of the rendered pool that the new ranges leave out, by name")
	assert.Empty(t, Dropped(addrs, rendered, PoolRanges([]string{"192.0.2.0/29"})), "growing drops nothing")
	assert.Len(t, Dropped(addrs, rendered, nil), 2)
	assert.Empty(t, Dropped(addrs, nil, nil), "nothing rendered, nothing dropped")
}

func TestKeeps(t *testing.T) {
	r := func(s ...string) []AddressRange { return PoolRanges(s) }
	tests := []struct {
		name           string
		rendered, next []AddressRange
		want           bool
	}{
		{"the same ranges", r("192.0.2.0/30", "2001:db8::/126"), r("192.0.2.0/30", "2001:db8::/126"), true},
		{"grown", r("192.0.2.0/30"), r("192.0.2.0/29"), true},
		{"reordered, one more", r("192.0.2.0/30", "198.51.100.0/30"), r("203.0.113.0/30", "198.51.100.0/30", "192.0.2.0/30"), true},
		{"nothing rendered", nil, r("192.0.2.0/30"), true},
		{"shrunk", r("192.0.2.0/29"), r("192.0.2.0/30"), false},
		{"a range gone", r("192.0.2.0/30", "2001:db8::/126"), r("192.0.2.0/30"), false},
		{"split across two ranges: read the ledger", r("192.0.2.0/30"), r("192.0.2.0/31", "192.0.2.2/31"), false},
		{"nothing next", r("192.0.2.0/30"), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Keeps(tt.rendered, tt.next))
			if tt.want {
				assert.Empty(t, Dropped([]iadv1alpha1.IPAddress{{Spec: iadv1alpha1.IPAddressSpec{Address: "192.0.2.1"}}}, tt.rendered, tt.next),
					"what Keeps passes drops nothing")
			}
		})
	}
}

func TestDroppedMessage(t *testing.T) {
	a := iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-192-0-2-1"},
		Spec:   iadv1alpha1.IPAddressSpec{Address: "192.0.2.1", ClaimRef: &iadv1alpha1.ClaimReference{Namespace: "team-a", Name: "web"}},
		Status: iadv1alpha1.IPAddressStatus{AssociatedTo: &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "team-a", Name: "front"}}}
	b := iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-192-0-2-2"}, Spec: iadv1alpha1.IPAddressSpec{Address: "192.0.2.2"}}
	assert.Equal(t, "the new spec.parameters.addresses leave out 2 address(es) of IPAddressPool metallb-system/iad-gold still in use: "+
		"192.0.2.1 (IPAddress ip-192-0-2-1, claim team-a/web, attached to Service team-a/front); 192.0.2.2 (IPAddress ip-192-0-2-2, no claim); "+
		"MetalLB would take them from their owners. Keep them in the class's addresses, or give them up first "+
		"(delete their claims, or the IPAddresses); the previous rendering stays",
		DroppedMessage("metallb-system/iad-gold", []*iadv1alpha1.IPAddress{&a, &b}))

	many := make([]*iadv1alpha1.IPAddress, 12)
	for i := range many {
		many[i] = &b
	}
	assert.Contains(t, DroppedMessage("p", many), "; and 2 more;")
}
