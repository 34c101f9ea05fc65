package class

import (
	"net/netip"
	"slices"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// Retained is what stays of a pool whose class is gone: one host entry
// ("192.0.2.7/32", "2001:db8::7/128") per address recorded under the class
// name that the pool contains, sorted and without duplicates. Addresses the
// pool does not contain (already Lost) are not added back: MetalLB would
// refuse its whole configuration if they overlapped another pool. An empty
// result means nothing is left to serve.
func Retained(poolAddresses []string, addrs []iadv1alpha1.IPAddress) []string {
	ranges := classparams.PoolRanges(poolAddresses)
	var ips []string
	for i := range addrs {
		if ip, err := names.ParseAddress(addrs[i].Spec.Address); err == nil && classparams.Contains(ranges, ip) {
			ips = append(ips, ip.String())
		}
	}
	out := []string{}
	for _, s := range names.SplitIPs(marks.PinValue(ips)) { // sorted, IPv4 first, no duplicates
		ip := netip.MustParseAddr(s)
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()).String())
	}
	return out
}

// planRetain returns the class's pool (nil: none of the class's) narrowed
// to what stays of it, with the retained-for note; withdraw when nothing
// stays, and neither when the pool is narrowed already.
func planRetain(class string, pool *metallbv1beta1.IPAddressPool, addrs []iadv1alpha1.IPAddress) (narrowed *metallbv1beta1.IPAddressPool, withdraw bool) {
	if pool == nil {
		return nil, true
	}
	keep := Retained(pool.Spec.Addresses, addrs)
	if len(keep) == 0 {
		return nil, true
	}
	msg := RetainedMessage(class, keep)
	if slices.Equal(pool.Spec.Addresses, keep) && !pool.Spec.AvoidBuggyIPs && pool.Annotations[marks.KeyRetained] == msg {
		return nil, false
	}
	narrowed = pool.DeepCopy()
	narrowed.Spec.Addresses = keep
	// Every entry is an address in use: none may be skipped.
	narrowed.Spec.AvoidBuggyIPs = false
	if narrowed.Annotations == nil {
		narrowed.Annotations = map[string]string{}
	}
	narrowed.Annotations[marks.KeyRetained] = msg
	return narrowed, false
}
