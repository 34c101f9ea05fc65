package classparams

import (
	"math"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAddressRange(t *testing.T) {
	tests := []struct {
		in   string
		want AddressRange
		err  string
	}{
		{in: "192.0.2.0/24", want: rng("192.0.2.0", "192.0.2.255", "192.0.2.0/24")},
		{in: "0.0.0.0/0", want: rng("0.0.0.0", "255.255.255.255", "0.0.0.0/0")},
		{in: "192.0.2.9/32", want: rng("192.0.2.9", "192.0.2.9", "192.0.2.9/32")},
		{in: "2001:db8::/32", want: rng("2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db8::/32")},
		{in: "::/0", want: rng("::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::/0")},
		{in: "2001:db8::/127", want: rng("2001:db8::", "2001:db8::1", "2001:db8::/127")},
		{in: "2001:db8::/65", want: rng("2001:db8::", "2001:db8::7fff:ffff:ffff:ffff", "2001:db8::/65")},
		{in: "2001:db8::/63", want: rng("2001:db8::", "2001:db8:0:1:ffff:ffff:ffff:ffff", "2001:db8::/63")},
		{in: "198.51.100.1-198.51.100.1", want: rng("198.51.100.1", "198.51.100.1", "198.51.100.1-198.51.100.1")},
		{in: "2001:0db8::0001-2001:db8::1:0", want: rng("2001:db8::1", "2001:db8::1:0", "2001:db8::1-2001:db8::1:0")},
		{in: "192.0.2.0/-1", err: `"192.0.2.0/-1" is not a valid range: its start "192.0.2.0/" is not an IP address`},
		{in: "192.0.2.0/", err: `"192.0.2.0/" is not a valid CIDR`},
		{in: "/24", err: `"/24" is not a valid CIDR`},
		{in: "fe80::/64%eth0", err: `"fe80::/64%eth0" is not a valid CIDR`},
		{in: "-", err: `"-" is not a valid range: its start "" is not an IP address`},
		{in: "fe80::1%eth0", err: `"fe80::1%eth0" is neither a CIDR (192.0.2.0/24) nor a range (192.0.2.10-192.0.2.20)`},
		{in: "::ffff:192.0.2.1", err: `"::ffff:192.0.2.1" is neither a CIDR (192.0.2.0/24) nor a range (192.0.2.10-192.0.2.20)`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAddressRange(tt.in)
			if tt.err != "" {
				require.Error(t, err)
				assert.Equal(t, tt.err, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.want.Text, got.String())
		})
	}
}

func TestAddressRangeSizeAndOverlap(t *testing.T) {
	sizes := []struct {
		in   string
		want float64
	}{
		{"192.0.2.0/24", 256},
		{"192.0.2.7/32", 1},
		{"192.0.2.10-192.0.2.20", 11},
		{"0.0.0.0/0", 1 << 32},
		{"2001:db8::/120", 256},
		{"2001:db8::/64", math.Exp2(64)},
		{"2001:db8::/63", math.Exp2(65)},
		{"::/0", math.Exp2(128)},
		{"2001:db8::ffff:ffff:ffff:ffff-2001:db8:0:1::", 2},
	}
	for _, s := range sizes {
		r, err := ParseAddressRange(s.in)
		require.NoError(t, err, s.in)
		assert.Equal(t, s.want, r.Size(), s.in)
	}

	overlaps := []struct {
		a, b string
		want bool
	}{
		{"192.0.2.0/24", "192.0.2.128/25", true},
		{"192.0.2.0/25", "192.0.2.128/25", false},
		{"192.0.2.0/25", "192.0.2.127-192.0.2.130", true},
		{"192.0.2.10-192.0.2.20", "192.0.2.20-192.0.2.30", true},
		{"192.0.2.10-192.0.2.20", "192.0.2.21-192.0.2.30", false},
		{"0.0.0.0/0", "::/0", false},
		{"2001:db8::/64", "2001:db8::ff-2001:db8::1:0:0:0:0", true},
		{"2001:db8::/64", "2001:db8:0:1::-2001:db8:0:1::5", false},
	}
	for _, o := range overlaps {
		a, err := ParseAddressRange(o.a)
		require.NoError(t, err)
		b, err := ParseAddressRange(o.b)
		require.NoError(t, err)
		assert.Equal(t, o.want, a.overlaps(b), "%s overlaps %s", o.a, o.b)
		assert.Equal(t, o.want, b.overlaps(a), "%s overlaps %s", o.b, o.a)
	}
}

func TestFamilySizes(t *testing.T) {
	p, err := ParseAddressRange("192.0.2.0/24")
	require.NoError(t, err)
	q, err := ParseAddressRange("198.51.100.1-198.51.100.4")
	require.NoError(t, err)
	s, err := ParseAddressRange("2001:db8::/112")
	require.NoError(t, err)
	v4, v6 := FamilySizes([]AddressRange{p, s, q})
	assert.Equal(t, float64(260), v4)
	assert.Equal(t, float64(65536), v6)
	v4, v6 = FamilySizes(nil)
	assert.Zero(t, v4)
	assert.Zero(t, v6)
}

func TestWidestPrefix(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"192.0.2.0/24", 24},
		{"192.0.2.0-192.0.2.255", 24},
		{"192.0.2.10-192.0.2.20", 30}, // .10/31 .12/30 .16/30 .20/32
		{"192.0.2.1-192.0.2.254", 26}, // .64/26 and .128/26 are the widest blocks
		{"192.0.2.7-192.0.2.7", 32},
		{"0.0.0.0-255.255.255.255", 0},
		{"0.0.0.1-255.255.255.255", 1}, // 128.0.0.0/1
		{"2001:db8::/64", 64},
		{"2001:db8::1-2001:db8::ff", 121}, // ::80/121
		{"::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0},
	}
	for _, tt := range tests {
		r, err := ParseAddressRange(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, widestPrefix(r), tt.in)
	}
}

func TestLastOf(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.0/24":   "192.0.2.255",
		"192.0.2.77/32":  "192.0.2.77",
		"10.0.0.0/8":     "10.255.255.255",
		"0.0.0.0/0":      "255.255.255.255",
		"2001:db8::/64":  "2001:db8::ffff:ffff:ffff:ffff",
		"2001:db8::/96":  "2001:db8::ffff:ffff",
		"2001:db8::/128": "2001:db8::",
		"::/0":           "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
		"2001:db8::/33":  "2001:db8:7fff:ffff:ffff:ffff:ffff:ffff",
	} {
		assert.Equal(t, netip.MustParseAddr(want), lastOf(netip.MustParsePrefix(in)), in)
	}
}
