package marks

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/cozystack/metallb-iad/internal/names"
)

// PinValue renders IPs as a pin in one canonical order (IPv4 first,
// ascending, deduplicated), so equal pins compare equal. Text that does
// not parse is dropped.
func PinValue(ips []string) string {
	var parsed []netip.Addr
	for _, s := range ips {
		ip, err := names.ParseAddress(s)
		if err != nil {
			continue
		}
		parsed = append(parsed, ip)
	}
	slices.SortFunc(parsed, func(a, b netip.Addr) int { return a.Compare(b) })
	parsed = slices.Compact(parsed)
	out := make([]string, len(parsed))
	for i, ip := range parsed {
		out[i] = ip.String()
	}
	return strings.Join(out, ",")
}

// HandPin returns the pin the Service carries without the driver's marker
// (either annotation spelling, or spec.loadBalancerIP), canonical when it
// parses; "" when there is none or the driver wrote it.
func (m Marks) HandPin() string {
	if m.PinnedBy != "" {
		return ""
	}
	for _, v := range []string{m.Pin, m.LegacyPin, m.SpecPin} {
		if strings.TrimSpace(v) != "" {
			if p := PinValue(strings.Split(v, ",")); p != "" {
				return p
			}
			return v
		}
	}
	return ""
}
