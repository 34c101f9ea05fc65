package classparams

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"

	"github.com/cozystack/metallb-iad/internal/names"
)

// AddressRange is one entry of a class's addresses: an inclusive range of
// one address family. A CIDR is stored as the range it covers.
type AddressRange struct {
	// Start and End are the first and last address, both of one family,
	// Start <= End.
	Start, End netip.Addr
	// Text is the canonical form written into the MetalLB pool: a CIDR
	// ("192.0.2.0/24", "2001:db8::/64") or a range ("192.0.2.10-192.0.2.20").
	Text string
}

// Contains reports whether ip lies in the range.
func (r AddressRange) Contains(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.Is4() == r.Is4() && r.Start.Compare(ip) <= 0 && ip.Compare(r.End) <= 0
}

// Contains reports whether one of the ranges contains ip.
func Contains(ranges []AddressRange, ip netip.Addr) bool {
	return slices.ContainsFunc(ranges, func(r AddressRange) bool { return r.Contains(ip) })
}

// InRanges reports whether ip, in text form, parses and lies in one of
// the ranges.
func InRanges(ranges []AddressRange, ip string) bool {
	a, err := names.ParseAddress(ip)
	return err == nil && Contains(ranges, a)
}

// Covers reports whether ip lies in one of the class's ranges.
func (p Parameters) Covers(ip netip.Addr) bool {
	return Contains(p.Addresses, ip)
}

// String returns the canonical text of the range.
func (r AddressRange) String() string { return r.Text }

// Is4 reports whether the range holds IPv4 addresses.
func (r AddressRange) Is4() bool { return r.Start.Is4() }

// overlaps reports whether two ranges share at least one address.
func (r AddressRange) overlaps(o AddressRange) bool {
	if r.Is4() != o.Is4() {
		return false
	}
	return r.Start.Compare(o.End) <= 0 && o.Start.Compare(r.End) <= 0
}

// Size is the number of addresses in the range, as a float64: exact up to
// 2^53 and a close approximation above, up to 2^128 for all of IPv6, so it
// never overflows.
func (r AddressRange) Size() float64 {
	d := sub(fromAddr(r.End), fromAddr(r.Start))
	return float64(d.hi)*math.Exp2(64) + float64(d.lo) + 1
}

// ParseAddressRange parses one entry of spec.parameters.addresses: a CIDR
// (IPv4 or IPv6, without host bits) or a MetalLB range "start-end" of two
// addresses of one family with start <= end. The error text says what is
// wrong with the entry; it does not repeat the entry's position.
func ParseAddressRange(s string) (AddressRange, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return AddressRange{}, fmt.Errorf("is empty; write a CIDR such as 192.0.2.0/24 or a range such as 192.0.2.10-192.0.2.20")
	}
	if strings.Contains(t, "-") {
		return parseRange(s, t)
	}
	if strings.Contains(t, "/") {
		return parseCIDR(s, t)
	}
	if ip, err := netip.ParseAddr(t); err == nil && ip.Zone() == "" && !ip.Is4In6() {
		return AddressRange{}, fmt.Errorf("%q is a single address, not a CIDR or a range; write %s/%d", s, ip, ip.BitLen())
	}
	return AddressRange{}, fmt.Errorf("%q is neither a CIDR (192.0.2.0/24) nor a range (192.0.2.10-192.0.2.20)", s)
}

func parseCIDR(orig, t string) (AddressRange, error) {
	p, err := netip.ParsePrefix(t)
	if err != nil {
		return AddressRange{}, fmt.Errorf("%q is not a valid CIDR", orig)
	}
	if p.Addr().Is4In6() {
		return AddressRange{}, fmt.Errorf("%q is an IPv4-mapped IPv6 CIDR; write the IPv4 CIDR instead", orig)
	}
	if m := p.Masked(); m != p {
		return AddressRange{}, fmt.Errorf("%q has host bits set; the network is %s", orig, m)
	}
	return AddressRange{Start: p.Addr(), End: lastOf(p), Text: p.String()}, nil
}

func parseRange(orig, t string) (AddressRange, error) {
	parts := strings.Split(t, "-")
	if len(parts) != 2 {
		return AddressRange{}, fmt.Errorf("%q is not a valid range: write start-end, such as 192.0.2.10-192.0.2.20", orig)
	}
	var ends [2]netip.Addr
	for i, part := range parts {
		part = strings.TrimSpace(part)
		ip, err := netip.ParseAddr(part)
		which := [2]string{"start", "end"}[i]
		switch {
		case err != nil:
			return AddressRange{}, fmt.Errorf("%q is not a valid range: its %s %q is not an IP address", orig, which, part)
		case ip.Zone() != "":
			return AddressRange{}, fmt.Errorf("%q is not a valid range: its %s %q has a zone", orig, which, part)
		case ip.Is4In6():
			return AddressRange{}, fmt.Errorf("%q is not a valid range: its %s %q is an IPv4-mapped IPv6 address; write the IPv4 address instead", orig, which, part)
		}
		ends[i] = ip
	}
	if ends[0].Is4() != ends[1].Is4() {
		return AddressRange{}, fmt.Errorf("%q mixes IPv4 and IPv6: both ends of a range must be of one family", orig)
	}
	if ends[0].Compare(ends[1]) > 0 {
		return AddressRange{}, fmt.Errorf("%q is reversed: its start %s is after its end %s", orig, ends[0], ends[1])
	}
	return AddressRange{Start: ends[0], End: ends[1], Text: ends[0].String() + "-" + ends[1].String()}, nil
}

// FamilySizes returns the number of IPv4 and IPv6 addresses in ranges.
func FamilySizes(ranges []AddressRange) (v4, v6 float64) {
	for _, r := range ranges {
		if r.Is4() {
			v4 += r.Size()
		} else {
			v6 += r.Size()
		}
	}
	return v4, v6
}

// widestPrefix returns the shortest prefix length among the CIDR blocks
// that exactly cover the range (the blocks MetalLB splits a range into).
// A BGP aggregation length shorter than it would announce addresses that
// are not in the range, which MetalLB refuses.
func widestPrefix(r AddressRange) int {
	bits := r.Start.BitLen()
	widest := bits
	cur := r.Start
	for {
		for l := 0; l <= bits; l++ {
			p := netip.PrefixFrom(cur, l)
			if p.Masked().Addr() != cur {
				continue
			}
			last := lastOf(p)
			if last.Compare(r.End) > 0 {
				continue
			}
			widest = min(widest, l)
			cur = last
			break
		}
		if cur == r.End {
			return widest
		}
		cur = cur.Next()
	}
}

// u128 is an address as a 128-bit number (IPv4 in the low 32 bits).
type u128 struct{ hi, lo uint64 }

func fromAddr(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{lo: uint64(binary.BigEndian.Uint32(b[:]))}
	}
	b := a.As16()
	return u128{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:])}
}

func toAddr(u u128, is4 bool) netip.Addr {
	if is4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(u.lo))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], u.hi)
	binary.BigEndian.PutUint64(b[8:], u.lo)
	return netip.AddrFrom16(b)
}

func sub(a, b u128) u128 {
	lo := a.lo - b.lo
	hi := a.hi - b.hi
	if a.lo < b.lo {
		hi--
	}
	return u128{hi: hi, lo: lo}
}

// hostMask has the n lowest bits set (0 <= n <= 128).
func hostMask(n int) u128 {
	switch {
	case n <= 0:
		return u128{}
	case n < 64:
		return u128{lo: 1<<uint(n) - 1}
	case n == 64:
		return u128{lo: math.MaxUint64}
	case n < 128:
		return u128{hi: 1<<uint(n-64) - 1, lo: math.MaxUint64}
	default:
		return u128{hi: math.MaxUint64, lo: math.MaxUint64}
	}
}

// lastOf returns the last address of a (masked) prefix.
func lastOf(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	u, m := fromAddr(a), hostMask(a.BitLen()-p.Bits())
	return toAddr(u128{hi: u.hi | m.hi, lo: u.lo | m.lo}, a.Is4())
}
