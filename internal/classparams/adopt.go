package classparams

import "net/netip"

// Contains reports whether ip lies in the range.
func (r AddressRange) Contains(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.Is4() == r.Is4() && r.Start.Compare(ip) <= 0 && ip.Compare(r.End) <= 0
}

// Covers reports whether ip lies in one of the class's ranges.
func (p Parameters) Covers(ip netip.Addr) bool {
	for _, r := range p.Addresses {
		if r.Contains(ip) {
			return true
		}
	}
	return false
}
