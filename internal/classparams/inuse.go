package classparams

import (
	"fmt"
	"slices"
	"strings"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// maxNamed is how many dropped addresses a refusal names before it only
// counts the rest.
const maxNamed = 10

// Keeps reports whether next keeps every address of rendered: each
// rendered range lies inside one range of next. Then no address can be
// dropped, and the ledger need not be read.
func Keeps(rendered, next []AddressRange) bool {
	for _, r := range rendered {
		if !slices.ContainsFunc(next, func(n AddressRange) bool { return n.Contains(r.Start) && n.Contains(r.End) }) {
			return false
		}
	}
	return true
}

// Dropped lists, sorted by name, the live addresses of a class (any phase,
// not being deleted) that the rendered pool's ranges contain and the new
// ranges do not: rendering the new ranges would make MetalLB take them
// from whoever holds them. Addresses the rendered pool does not contain
// (already outside it, or never in it) are not dropped by the change.
func Dropped(addrs []iadv1alpha1.IPAddress, rendered, next []AddressRange) []*iadv1alpha1.IPAddress {
	var out []*iadv1alpha1.IPAddress
	for i := range addrs {
		a := &addrs[i]
		if a.DeletionTimestamp != nil {
			continue
		}
		ip, err := names.ParseAddress(a.Spec.Address)
		if err != nil || !Contains(rendered, ip) || Contains(next, ip) {
			continue
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y *iadv1alpha1.IPAddress) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// DroppedMessage is the refusal's message: the addresses the change would
// drop, each with its claim and the Service it is attached to.
func DroppedMessage(pool string, dropped []*iadv1alpha1.IPAddress) string {
	var parts []string
	for i, a := range dropped {
		if i == maxNamed {
			parts = append(parts, fmt.Sprintf("and %d more", len(dropped)-maxNamed))
			break
		}
		who := "no claim"
		if ref := a.Spec.ClaimRef; ref != nil {
			who = "claim " + ref.Namespace + "/" + ref.Name
		}
		if w := a.Status.AssociatedTo; w != nil {
			who += fmt.Sprintf(", attached to %s %s/%s", w.Kind, w.Namespace, w.Name)
		}
		parts = append(parts, fmt.Sprintf("%s (IPAddress %s, %s)", a.Spec.Address, a.Name, who))
	}
	return fmt.Sprintf("the new spec.parameters.addresses leave out %d address(es) of IPAddressPool %s still in use: %s; "+
		"MetalLB would take them from their owners. Keep them in the class's addresses, or give them up first "+
		"(delete their claims, or the IPAddresses); the previous rendering stays",
		len(dropped), pool, strings.Join(parts, "; "))
}
