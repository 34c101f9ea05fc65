package names

import (
	"fmt"
	"net/netip"
	"strings"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// AddressName derives the IPAddress object name from an IP, injectively and
// as a valid DNS-1123 subdomain: IPv4 (and IPv4-mapped) 203.0.113.7 ->
// ip-203-0-113-7; IPv6 fully expanded, 2001:db8::7 ->
// ip6-2001-0db8-0000-0000-0000-0000-0000-0007. Expanding keeps the mapping
// one-to-one whatever text form arrives; zones are refused.
func AddressName(ip netip.Addr) (string, error) {
	if !ip.IsValid() {
		return "", fmt.Errorf("invalid IP address")
	}
	if ip.Zone() != "" {
		return "", fmt.Errorf("IP address %s has a zone; zoned addresses are not allocatable", ip)
	}
	ip = ip.Unmap()
	if ip.Is4() {
		b := ip.As4()
		return fmt.Sprintf("ip-%d-%d-%d-%d", b[0], b[1], b[2], b[3]), nil
	}
	b := ip.As16()
	groups := make([]string, 8)
	for i := range groups {
		groups[i] = fmt.Sprintf("%02x%02x", b[2*i], b[2*i+1])
	}
	return "ip6-" + strings.Join(groups, "-"), nil
}

// ParseAddress parses an IP in any text form and returns it canonical
// (IPv4-mapped becomes IPv4, IPv6 compressed per RFC 5952).
func ParseAddress(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		return netip.Addr{}, err
	}
	if ip.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("IP address %q has a zone", s)
	}
	return ip.Unmap(), nil
}

// SplitIPs parses a comma-separated list of IPs (a MetalLB pin) into
// canonical IPs, skipping what does not parse.
func SplitIPs(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if ip, err := ParseAddress(f); err == nil {
			out = append(out, ip.String())
		}
	}
	return out
}

// AddressFamily is the family of an IP in text form, "" when it does not parse.
func AddressFamily(s string) iadv1alpha1.IPFamily {
	ip, err := ParseAddress(s)
	switch {
	case err != nil:
		return ""
	case ip.Is4():
		return iadv1alpha1.FamilyIPv4
	default:
		return iadv1alpha1.FamilyIPv6
	}
}
