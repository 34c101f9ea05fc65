package names

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestAddressName(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"203.0.113.7", "ip-203-0-113-7"},
		{"0.0.0.0", "ip-0-0-0-0"},
		{"255.255.255.255", "ip-255-255-255-255"},
		{"::ffff:203.0.113.7", "ip-203-0-113-7"}, // v4-mapped v6 is the same address
		{"2001:db8::7", "ip6-2001-0db8-0000-0000-0000-0000-0000-0007"},
		{"2001:DB8:0:0:0:0:0:7", "ip6-2001-0db8-0000-0000-0000-0000-0000-0007"}, // same, uncompressed, upper case
		{"::", "ip6-0000-0000-0000-0000-0000-0000-0000-0000"},
		{"::1", "ip6-0000-0000-0000-0000-0000-0000-0000-0001"},
		{"fd00:10:96::ffff", "ip6-fd00-0010-0096-0000-0000-0000-0000-ffff"},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ip6-ffff-ffff-ffff-ffff-ffff-ffff-ffff-ffff"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ip, err := ParseAddress(tt.in)
			require.NoError(t, err)
			got, err := AddressName(ip)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Empty(t, validation.IsDNS1123Subdomain(got), "not a DNS-1123 subdomain")
			assert.Empty(t, validation.IsDNS1123Label(got), "not a DNS-1123 label")
		})
	}
}

func TestAddressNameRefusesBadInput(t *testing.T) {
	_, err := AddressName(netip.Addr{})
	assert.Error(t, err)
	_, err = AddressName(netip.MustParseAddr("fe80::1%eth0"))
	assert.ErrorContains(t, err, "zone")
	for _, s := range []string{"", "1.2.3", "203.0.113.7/32", "fe80::1%eth0", "not-an-ip"} {
		_, err := ParseAddress(s)
		assert.Error(t, err, s)
	}
}

// TestAddressNameInjective checks that distinct addresses never share a name,
// across a neighbourhood of v4 and v6 addresses that differ in one bit or one
// nibble, including the v4 range embedded in v6.
func TestAddressNameInjective(t *testing.T) {
	seen := map[string]netip.Addr{}
	add := func(ip netip.Addr) {
		ip = ip.Unmap()
		n, err := AddressName(ip)
		require.NoError(t, err)
		if prev, ok := seen[n]; ok {
			require.Equal(t, prev, ip, "%s and %s share the name %s", prev, ip, n)
		}
		seen[n] = ip
	}
	bases := []netip.Addr{
		netip.MustParseAddr("10.0.0.0"),
		netip.MustParseAddr("2001:db8::"),
		netip.MustParseAddr("::ffff:10.0.0.0"),
		netip.MustParseAddr("::a00:0"), // v4-compatible (not mapped): a distinct v6 address
	}
	for _, b := range bases {
		ip := b
		for i := 0; i < 2048; i++ {
			add(ip)
			ip = ip.Next()
		}
		raw := b.As16()
		for bit := 0; bit < 128; bit++ {
			r := raw
			r[bit/8] ^= 1 << (bit % 8)
			add(netip.AddrFrom16(r))
		}
	}
}
