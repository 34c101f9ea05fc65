package classparams

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// rng builds an expected AddressRange.
func rng(start, end, text string) AddressRange {
	return AddressRange{Start: netip.MustParseAddr(start), End: netip.MustParseAddr(end), Text: text}
}

var (
	net24   = rng("192.0.2.0", "192.0.2.255", "192.0.2.0/24")
	net6_64 = rng("2001:db8::", "2001:db8::ffff:ffff:ffff:ffff", "2001:db8::/64")
)

func TestParseParameters(t *testing.T) {
	tests := []struct {
		name string
		// in is the raw JSON; "<nil>" means no parameters at all.
		in   string
		want Parameters
		err  string
	}{
		// Accepted.
		{
			name: "IPv4 CIDR, L2 by default",
			in:   `{"addresses": ["192.0.2.0/24"]}`,
			want: Parameters{Addresses: []AddressRange{net24}, Advertisement: AdvertisementL2},
		},
		{
			name: "IPv6 CIDR is normalized",
			in:   `{"addresses": ["2001:DB8:0:0::/64"]}`,
			want: Parameters{Addresses: []AddressRange{net6_64}, Advertisement: AdvertisementL2},
		},
		{
			name: "IPv4 range, spaces trimmed",
			in:   `{"addresses": [" 192.0.2.10 - 192.0.2.20 "]}`,
			want: Parameters{Addresses: []AddressRange{rng("192.0.2.10", "192.0.2.20", "192.0.2.10-192.0.2.20")}, Advertisement: AdvertisementL2},
		},
		{
			name: "IPv6 range is normalized",
			in:   `{"addresses": ["2001:db8:0::1-2001:DB8::FF"]}`,
			want: Parameters{Addresses: []AddressRange{rng("2001:db8::1", "2001:db8::ff", "2001:db8::1-2001:db8::ff")}, Advertisement: AdvertisementL2},
		},
		{
			name: "one-address range and /32",
			in:   `{"addresses": ["192.0.2.5-192.0.2.5", "192.0.2.7/32"]}`,
			want: Parameters{Addresses: []AddressRange{rng("192.0.2.5", "192.0.2.5", "192.0.2.5-192.0.2.5"), rng("192.0.2.7", "192.0.2.7", "192.0.2.7/32")}, Advertisement: AdvertisementL2},
		},
		{
			name: "both families, order kept",
			in:   `{"addresses": ["2001:db8::/64", "192.0.2.0/24"]}`,
			want: Parameters{Addresses: []AddressRange{net6_64, net24}, Advertisement: AdvertisementL2},
		},
		{
			name: "adjacent ranges do not overlap",
			in:   `{"addresses": ["192.0.2.0/25", "192.0.2.128-192.0.2.255"]}`,
			want: Parameters{Addresses: []AddressRange{rng("192.0.2.0", "192.0.2.127", "192.0.2.0/25"), rng("192.0.2.128", "192.0.2.255", "192.0.2.128-192.0.2.255")}, Advertisement: AdvertisementL2},
		},
		{
			name: "avoidBuggyIPs",
			in:   `{"addresses": ["192.0.2.0/24"], "avoidBuggyIPs": true}`,
			want: Parameters{Addresses: []AddressRange{net24}, AvoidBuggyIPs: true, Advertisement: AdvertisementL2},
		},
		{
			name: "explicit L2 with options",
			in: `{"addresses": ["192.0.2.0/24"], "advertisement": "L2",
			      "l2": {"interfaces": ["eth0", "eth1"], "nodeSelectors": [{"matchLabels": {"role": "edge"}}]}}`,
			want: Parameters{Addresses: []AddressRange{net24}, Advertisement: AdvertisementL2, L2: &L2Parameters{
				Interfaces:    []string{"eth0", "eth1"},
				NodeSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"role": "edge"}}},
			}},
		},
		{
			name: "null advertisement means L2",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": null}`,
			want: Parameters{Addresses: []AddressRange{net24}, Advertisement: AdvertisementL2},
		},
		{
			name: "BGP without options",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP"}`,
			want: Parameters{Addresses: []AddressRange{net24}, Advertisement: AdvertisementBGP},
		},
		{
			name: "BGP with an empty bgp object",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {}}`,
			want: Parameters{Addresses: []AddressRange{net24}, Advertisement: AdvertisementBGP, BGP: &BGPParameters{}},
		},
		{
			name: "BGP with every option",
			in: `{"addresses": ["192.0.2.0/24", "2001:db8::/64"], "advertisement": "BGP",
			      "bgp": {"peers": ["tor-a", "tor-b"], "communities": ["65000:100", "large:1:2:3", "no-advertise"],
			              "localPref": 4294967295, "aggregationLength": 24, "aggregationLengthV6": 64}}`,
			want: Parameters{Addresses: []AddressRange{net24, net6_64}, Advertisement: AdvertisementBGP, BGP: &BGPParameters{
				Peers:               []string{"tor-a", "tor-b"},
				Communities:         []string{"65000:100", "large:1:2:3", "no-advertise"},
				LocalPref:           4294967295,
				AggregationLength:   ptr.To[int32](24),
				AggregationLengthV6: ptr.To[int32](64),
			}},
		},
		{
			name: "aggregation length as wide as the widest block of a range",
			in:   `{"addresses": ["192.0.2.10-192.0.2.20"], "advertisement": "BGP", "bgp": {"aggregationLength": 30}}`,
			want: Parameters{Addresses: []AddressRange{rng("192.0.2.10", "192.0.2.20", "192.0.2.10-192.0.2.20")}, Advertisement: AdvertisementBGP,
				BGP: &BGPParameters{AggregationLength: ptr.To[int32](30)}},
		},
		{
			name: "aggregation length of one family ignores the other",
			in:   `{"addresses": ["2001:db8::/64"], "advertisement": "BGP", "bgp": {"aggregationLength": 0}}`,
			want: Parameters{Addresses: []AddressRange{net6_64}, Advertisement: AdvertisementBGP,
				BGP: &BGPParameters{AggregationLength: ptr.To[int32](0)}},
		},

		// Missing or malformed parameters.
		{
			name: "no parameters",
			in:   "<nil>",
			err:  `spec.parameters is missing: it must list the class's addresses, e.g. {"addresses": ["192.0.2.0/24"]}`,
		},
		{
			name: "null parameters",
			in:   `null`,
			err:  `spec.parameters is missing: it must list the class's addresses, e.g. {"addresses": ["192.0.2.0/24"]}`,
		},
		{
			name: "not JSON",
			in:   `{"addresses": [`,
			err:  `spec.parameters is not valid JSON: unexpected end of JSON input`,
		},
		{
			name: "not an object",
			in:   `["192.0.2.0/24"]`,
			err:  `spec.parameters: expected an object, got a list`,
		},
		{
			name: "empty object",
			in:   `{}`,
			err:  `spec.parameters.addresses is required: list at least one CIDR or range, e.g. ["192.0.2.0/24"]`,
		},
		{
			name: "empty addresses",
			in:   `{"addresses": []}`,
			err:  `spec.parameters.addresses is required: list at least one CIDR or range, e.g. ["192.0.2.0/24"]`,
		},
		{
			name: "null addresses",
			in:   `{"addresses": null}`,
			err:  `spec.parameters.addresses is required: list at least one CIDR or range, e.g. ["192.0.2.0/24"]`,
		},

		// Wrong types.
		{
			name: "addresses is a string",
			in:   `{"addresses": "192.0.2.0/24"}`,
			err:  `spec.parameters.addresses: expected a list of strings, got a string`,
		},
		{
			name: "addresses holds a number",
			in:   `{"addresses": [19202]}`,
			err:  `spec.parameters.addresses: expected a list of strings, got a list containing a number`,
		},
		{
			name: "avoidBuggyIPs is a string",
			in:   `{"addresses": ["192.0.2.0/24"], "avoidBuggyIPs": "yes"}`,
			err:  `spec.parameters.avoidBuggyIPs: expected true or false, got a string`,
		},
		{
			name: "advertisement is a number",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": 2}`,
			err:  `spec.parameters.advertisement: expected a string, got a number`,
		},
		{
			name: "bgp is a list",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": []}`,
			err:  `spec.parameters.bgp: expected an object, got a list`,
		},
		{
			name: "negative localPref",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {"localPref": -1}}`,
			err:  `spec.parameters.bgp.localPref: expected an integer from 0 to 4294967295, got -1`,
		},
		{
			name: "localPref too large",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {"localPref": 4294967296}}`,
			err:  `spec.parameters.bgp.localPref: expected an integer from 0 to 4294967295, got 4294967296`,
		},
		{
			name: "warmAddresses",
			in:   `{"addresses": ["192.0.2.0/24"], "warmAddresses": 8}`,
			want: Parameters{Addresses: []AddressRange{net24}, Advertisement: AdvertisementL2, WarmAddresses: 8},
		},
		{
			name: "warmAddresses 0 is the default",
			in:   `{"addresses": ["192.0.2.0/24"], "warmAddresses": 0}`,
			want: Parameters{Addresses: []AddressRange{net24}, Advertisement: AdvertisementL2},
		},
		{
			name: "warmAddresses as large as the smallest family",
			in:   `{"addresses": ["192.0.2.0/30", "2001:db8::/64"], "warmAddresses": 4}`,
			want: Parameters{Addresses: []AddressRange{rng("192.0.2.0", "192.0.2.3", "192.0.2.0/30"), net6_64}, Advertisement: AdvertisementL2, WarmAddresses: 4},
		},
		{
			name: "negative warmAddresses",
			in:   `{"addresses": ["192.0.2.0/24"], "warmAddresses": -1}`,
			err:  `spec.parameters.warmAddresses: -1 is not a number of addresses from 0 to 1024`,
		},
		{
			name: "warmAddresses above the maximum",
			in:   `{"addresses": ["10.0.0.0/8"], "warmAddresses": 1025}`,
			err:  `spec.parameters.warmAddresses: 1025 is not a number of addresses from 0 to 1024`,
		},
		{
			name: "warmAddresses beyond a family's addresses",
			in:   `{"addresses": ["192.0.2.0/30", "2001:db8::/64"], "warmAddresses": 5}`,
			err:  `spec.parameters.warmAddresses: 5 is more than the 4 IPv4 addresses of the class`,
		},
		{
			name: "fractional warmAddresses",
			in:   `{"addresses": ["192.0.2.0/24"], "warmAddresses": 1.5}`,
			err:  `spec.parameters.warmAddresses: expected an integer from -2147483648 to 2147483647, got 1.5`,
		},
		{
			name: "warmAddresses as a string",
			in:   `{"addresses": ["192.0.2.0/24"], "warmAddresses": "8"}`,
			err:  `spec.parameters.warmAddresses: expected an integer from -2147483648 to 2147483647, got a string`,
		},
		{
			name: "warmAddresses in the wrong case",
			in:   `{"addresses": ["192.0.2.0/24"], "WarmAddresses": 8}`,
			err:  `spec.parameters: unknown key "WarmAddresses"`,
		},
		{
			name: "fractional aggregationLength",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {"aggregationLength": 24.5}}`,
			err:  `spec.parameters.bgp.aggregationLength: expected an integer from -2147483648 to 2147483647, got 24.5`,
		},
		{
			name: "peers is a string",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {"peers": "tor-a"}}`,
			err:  `spec.parameters.bgp.peers: expected a list of strings, got a string`,
		},
		{
			name: "interfaces holds an object",
			in:   `{"addresses": ["192.0.2.0/24"], "l2": {"interfaces": [{}]}}`,
			err:  `spec.parameters.l2.interfaces: expected a list of strings, got a list containing an object`,
		},
		{
			name: "label value is a number",
			in:   `{"addresses": ["192.0.2.0/24"], "l2": {"nodeSelectors": [{"matchLabels": {"zone": 1}}]}}`,
			err:  `spec.parameters.l2.nodeSelectors.matchLabels: expected a string, got a number`,
		},

		// Unknown and duplicate keys.
		{
			name: "unknown top-level key",
			in:   `{"addresses": ["192.0.2.0/24"], "autoAssign": true}`,
			err:  `spec.parameters: unknown key "autoAssign"`,
		},
		{
			name: "keys are case-sensitive",
			in:   `{"Addresses": ["192.0.2.0/24"]}`,
			err:  `spec.parameters: unknown key "Addresses"; spec.parameters.addresses is required: list at least one CIDR or range, e.g. ["192.0.2.0/24"]`,
		},
		{
			name: "several unknown keys, all named",
			in:   `{"addresses": ["192.0.2.0/24"], "pool": "x", "mode": "y"}`,
			err:  `spec.parameters: unknown key "pool"; spec.parameters: unknown key "mode"`,
		},
		{
			name: "unknown key in bgp",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {"peer": ["tor-a"]}}`,
			err:  `spec.parameters.bgp: unknown key "peer"`,
		},
		{
			name: "unknown key in l2",
			in:   `{"addresses": ["192.0.2.0/24"], "l2": {"interface": "eth0"}}`,
			err:  `spec.parameters.l2: unknown key "interface"`,
		},
		{
			name: "unknown key in a node selector",
			in:   `{"addresses": ["192.0.2.0/24"], "l2": {"nodeSelectors": [{"matchLabel": {"a": "b"}}]}}`,
			err:  `spec.parameters.l2.nodeSelectors[0]: unknown key "matchLabel"`,
		},
		{
			name: "duplicate key",
			in:   `{"addresses": ["192.0.2.0/24"], "addresses": ["198.51.100.0/24"]}`,
			err:  `spec.parameters: key "addresses" is given twice`,
		},

		// Bad addresses.
		{
			name: "prefix length too long",
			in:   `{"addresses": ["192.0.2.0/33"]}`,
			err:  `spec.parameters.addresses[0]: "192.0.2.0/33" is not a valid CIDR`,
		},
		{
			name: "octet out of range",
			in:   `{"addresses": ["192.0.2.300/24"]}`,
			err:  `spec.parameters.addresses[0]: "192.0.2.300/24" is not a valid CIDR`,
		},
		{
			name: "host bits set",
			in:   `{"addresses": ["192.0.2.1/24"]}`,
			err:  `spec.parameters.addresses[0]: "192.0.2.1/24" has host bits set; the network is 192.0.2.0/24`,
		},
		{
			name: "IPv6 host bits set",
			in:   `{"addresses": ["2001:db8::1/64"]}`,
			err:  `spec.parameters.addresses[0]: "2001:db8::1/64" has host bits set; the network is 2001:db8::/64`,
		},
		{
			name: "single address",
			in:   `{"addresses": ["192.0.2.7"]}`,
			err:  `spec.parameters.addresses[0]: "192.0.2.7" is a single address, not a CIDR or a range; write 192.0.2.7/32`,
		},
		{
			name: "single IPv6 address",
			in:   `{"addresses": ["2001:db8::7"]}`,
			err:  `spec.parameters.addresses[0]: "2001:db8::7" is a single address, not a CIDR or a range; write 2001:db8::7/128`,
		},
		{
			name: "garbage",
			in:   `{"addresses": ["ten.0.0.0"]}`,
			err:  `spec.parameters.addresses[0]: "ten.0.0.0" is neither a CIDR (192.0.2.0/24) nor a range (192.0.2.10-192.0.2.20)`,
		},
		{
			name: "empty entry",
			in:   `{"addresses": [" "]}`,
			err:  `spec.parameters.addresses[0]: is empty; write a CIDR such as 192.0.2.0/24 or a range such as 192.0.2.10-192.0.2.20`,
		},
		{
			name: "IPv4-mapped CIDR",
			in:   `{"addresses": ["::ffff:192.0.2.0/120"]}`,
			err:  `spec.parameters.addresses[0]: "::ffff:192.0.2.0/120" is an IPv4-mapped IPv6 CIDR; write the IPv4 CIDR instead`,
		},
		{
			name: "reversed range",
			in:   `{"addresses": ["192.0.2.20-192.0.2.10"]}`,
			err:  `spec.parameters.addresses[0]: "192.0.2.20-192.0.2.10" is reversed: its start 192.0.2.20 is after its end 192.0.2.10`,
		},
		{
			name: "reversed IPv6 range",
			in:   `{"addresses": ["2001:db8::ff-2001:db8::1"]}`,
			err:  `spec.parameters.addresses[0]: "2001:db8::ff-2001:db8::1" is reversed: its start 2001:db8::ff is after its end 2001:db8::1`,
		},
		{
			name: "range mixing families",
			in:   `{"addresses": ["192.0.2.1-2001:db8::1"]}`,
			err:  `spec.parameters.addresses[0]: "192.0.2.1-2001:db8::1" mixes IPv4 and IPv6: both ends of a range must be of one family`,
		},
		{
			name: "range with three ends",
			in:   `{"addresses": ["192.0.2.1-192.0.2.2-192.0.2.3"]}`,
			err:  `spec.parameters.addresses[0]: "192.0.2.1-192.0.2.2-192.0.2.3" is not a valid range: write start-end, such as 192.0.2.10-192.0.2.20`,
		},
		{
			name: "range without an end",
			in:   `{"addresses": ["192.0.2.1-"]}`,
			err:  `spec.parameters.addresses[0]: "192.0.2.1-" is not a valid range: its end "" is not an IP address`,
		},
		{
			name: "range with a CIDR start",
			in:   `{"addresses": ["192.0.2.0/24-192.0.2.9"]}`,
			err:  `spec.parameters.addresses[0]: "192.0.2.0/24-192.0.2.9" is not a valid range: its start "192.0.2.0/24" is not an IP address`,
		},
		{
			name: "range with a zone",
			in:   `{"addresses": ["fe80::1%eth0-fe80::9"]}`,
			err:  `spec.parameters.addresses[0]: "fe80::1%eth0-fe80::9" is not a valid range: its start "fe80::1%eth0" has a zone`,
		},
		{
			name: "range with an IPv4-mapped end",
			in:   `{"addresses": ["::ffff:192.0.2.1-::ffff:192.0.2.9"]}`,
			err:  `spec.parameters.addresses[0]: "::ffff:192.0.2.1-::ffff:192.0.2.9" is not a valid range: its start "::ffff:192.0.2.1" is an IPv4-mapped IPv6 address; write the IPv4 address instead`,
		},
		{
			name: "range inside a CIDR of the same class",
			in:   `{"addresses": ["192.0.2.0/24", "192.0.2.128-192.0.2.130"]}`,
			err:  `spec.parameters.addresses[1] (192.0.2.128-192.0.2.130) overlaps addresses[0] (192.0.2.0/24)`,
		},
		{
			name: "same CIDR twice in other spellings",
			in:   `{"addresses": ["2001:db8::/64", "2001:DB8:0::/64"]}`,
			err:  `spec.parameters.addresses[1] (2001:db8::/64) overlaps addresses[0] (2001:db8::/64)`,
		},
		{
			name: "every bad entry is reported, positions as written",
			in:   `{"addresses": ["nope", "192.0.2.0/24", "192.0.2.1/24", "192.0.2.0/25"]}`,
			err: `spec.parameters.addresses[0]: "nope" is neither a CIDR (192.0.2.0/24) nor a range (192.0.2.10-192.0.2.20); ` +
				`spec.parameters.addresses[2]: "192.0.2.1/24" has host bits set; the network is 192.0.2.0/24; ` +
				`spec.parameters.addresses[3] (192.0.2.0/25) overlaps addresses[1] (192.0.2.0/24)`,
		},

		// Bad advertisement settings.
		{
			name: "unknown advertisement",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "OSPF"}`,
			err:  `spec.parameters.advertisement: "OSPF" is not supported; use "L2" (the default) or "BGP"`,
		},
		{
			name: "advertisement is case-sensitive",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "bgp"}`,
			err:  `spec.parameters.advertisement: "bgp" is not supported; use "L2" (the default) or "BGP"`,
		},
		{
			name: "bgp options with L2",
			in:   `{"addresses": ["192.0.2.0/24"], "bgp": {"peers": ["tor-a"]}}`,
			err:  `spec.parameters.bgp is set but the advertisement is L2; set advertisement: BGP or remove bgp`,
		},
		{
			name: "l2 options with BGP",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "l2": {}}`,
			err:  `spec.parameters.l2 is set but the advertisement is BGP; set advertisement: L2 or remove l2`,
		},
		{
			name: "duplicate peer",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {"peers": ["a", "b", "a"]}}`,
			err:  `spec.parameters.bgp.peers[2] repeats "a"`,
		},
		{
			name: "empty peer",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {"peers": [""]}}`,
			err:  `spec.parameters.bgp.peers[0] is empty`,
		},
		{
			name: "community half out of range",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {"communities": ["65536:1"]}}`,
			err:  `spec.parameters.bgp.communities[0]: "65536:1" is not a community: both halves of <as>:<value> must be numbers from 0 to 65535`,
		},
		{
			name: "large community with a bad part",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {"communities": ["large:1:2:x"]}}`,
			err:  `spec.parameters.bgp.communities[0]: "large:1:2:x" is not a large community: its three parts must be numbers from 0 to 4294967295`,
		},
		{
			name: "community of three parts",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {"communities": ["1:2:3"]}}`,
			err:  `spec.parameters.bgp.communities[0]: "1:2:3" is not a community: write <as>:<value>, large:<global>:<data1>:<data2>, or the name of a Community resource`,
		},
		{
			name: "duplicate and empty communities",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {"communities": ["1:2", "1:2", ""]}}`,
			err:  `spec.parameters.bgp.communities[1] repeats "1:2"; spec.parameters.bgp.communities[2]: is empty`,
		},
		{
			name: "aggregationLength beyond 32",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {"aggregationLength": 33}}`,
			err:  `spec.parameters.bgp.aggregationLength: 33 is not a prefix length from 0 to 32`,
		},
		{
			name: "negative aggregationLengthV6",
			in:   `{"addresses": ["2001:db8::/64"], "advertisement": "BGP", "bgp": {"aggregationLengthV6": -1}}`,
			err:  `spec.parameters.bgp.aggregationLengthV6: -1 is not a prefix length from 0 to 128`,
		},
		{
			name: "aggregationLength wider than the CIDR",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP", "bgp": {"aggregationLength": 16}}`,
			err:  `spec.parameters.bgp.aggregationLength: 16 is shorter than the /24 prefix of addresses[0] (192.0.2.0/24); it would announce addresses outside the class`,
		},
		{
			name: "aggregationLength wider than the widest block of a range",
			in:   `{"addresses": ["192.0.2.0/24", "198.51.100.10-198.51.100.20"], "advertisement": "BGP", "bgp": {"aggregationLength": 29}}`,
			err:  `spec.parameters.bgp.aggregationLength: 29 is shorter than the /30 prefix of addresses[1] (198.51.100.10-198.51.100.20); it would announce addresses outside the class`,
		},
		{
			name: "aggregationLengthV6 wider than the CIDR",
			in:   `{"addresses": ["2001:db8::/64"], "advertisement": "BGP", "bgp": {"aggregationLengthV6": 48}}`,
			err:  `spec.parameters.bgp.aggregationLengthV6: 48 is shorter than the /64 prefix of addresses[0] (2001:db8::/64); it would announce addresses outside the class`,
		},
		{
			name: "duplicate interface",
			in:   `{"addresses": ["192.0.2.0/24"], "l2": {"interfaces": ["eth0", "eth0"]}}`,
			err:  `spec.parameters.l2.interfaces[1] repeats "eth0"`,
		},
		{
			name: "empty interface",
			in:   `{"addresses": ["192.0.2.0/24"], "l2": {"interfaces": [""]}}`,
			err:  `spec.parameters.l2.interfaces[0] is empty`,
		},
		{
			name: "invalid node selector",
			in:   `{"addresses": ["192.0.2.0/24"], "l2": {"nodeSelectors": [{"matchExpressions": [{"key": "zone", "operator": "Near"}]}]}}`,
			err:  `spec.parameters.l2.nodeSelectors[0]: "Near" is not a valid label selector operator`,
		},
		{
			name: "repeated node selector",
			in:   `{"addresses": ["192.0.2.0/24"], "l2": {"nodeSelectors": [{"matchLabels": {"a": "b"}}, {"matchLabels": {"a": "b"}}]}}`,
			err:  `spec.parameters.l2.nodeSelectors[1] repeats nodeSelectors[0]`,
		},
		{
			name: "problems of several fields together",
			in:   `{"addresses": ["192.0.2.0/24"], "advertisement": "BGPv4", "extra": 1}`,
			err:  `spec.parameters: unknown key "extra"; spec.parameters.advertisement: "BGPv4" is not supported; use "L2" (the default) or "BGP"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raw *apiextensionsv1.JSON
			if tt.in != "<nil>" {
				raw = &apiextensionsv1.JSON{Raw: []byte(tt.in)}
			}
			got, err := ParseParameters(raw)
			if tt.err != "" {
				require.Error(t, err)
				assert.Equal(t, tt.err, err.Error())
				assert.Equal(t, Parameters{}, got, "nothing is returned half-parsed")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
