package soak

import (
	"fmt"
	"net/netip"
	"os"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// Namespaces the soak writes to: tenants' Services and claims, and the
// admin's rogue Services.
var (
	Tenants = []string{"soak-a", "soak-b"}
	Rogue   = "soak-rogue"
)

// class is one IPAddressClass of the soak. Its ranges are small so pools
// run out and claims wait. Editable classes switch between a wide form and
// a narrow one that would drop the top half of each range.
type class struct {
	Name     string
	Reclaim  iadv1alpha1.ReclaimPolicy
	V4, V6   string // first address of the wide ranges
	Wide     int    // addresses per family in the wide form
	Narrow   int    // addresses per family in the narrow form (0: not editable)
	Editable bool
	// Warm is the most warm reservations (warmAddresses) the storm gives
	// the class, and the number it starts with; 0: the class never has any.
	Warm int
}

// Classes are the soak's classes; every one serves both families, so Dual
// claims can be served by each.
var Classes = []class{
	{Name: "soak-retain", Reclaim: iadv1alpha1.ReclaimRetain, V4: "10.77.0.0", V6: "fd00:77::", Wide: 8},
	{Name: "soak-delete", Reclaim: iadv1alpha1.ReclaimDelete, V4: "10.77.1.0", V6: "fd00:77:1::", Wide: 8},
	{Name: "soak-edit", Reclaim: iadv1alpha1.ReclaimDelete, V4: "10.77.2.0", V6: "fd00:77:2::", Wide: 8, Narrow: 4, Editable: true},
}

// warmClass keeps warm reservations, which the storm resizes (class-warm).
// It joins the soak with SOAK_WARM=1 (docs/reliability.md says why it is
// not part of make test's soak).
var warmClass = class{Name: "soak-warm", Reclaim: iadv1alpha1.ReclaimDelete, V4: "10.77.3.0", V6: "fd00:77:3::", Wide: 8, Warm: 3}

// steadyWarm keeps two warm reservations per family from the start of
// every run to its end: no operation of the storm resizes it, draws from
// it or damages its pool, so warm-reservations-kept always has a class
// that asks for warm addresses at rest, whatever the faults did meanwhile.
var steadyWarm = class{Name: "soak-steady-warm", Reclaim: iadv1alpha1.ReclaimDelete, V4: "10.77.4.0", V6: "fd00:77:4::", Wide: 8, Warm: 2}

func init() {
	if os.Getenv("SOAK_WARM") != "" {
		Classes = append(Classes, warmClass)
	}
}

// allClasses are the classes the storm picks from and the steady warm one.
func allClasses() []class { return append(append([]class{}, Classes...), steadyWarm) }

// Ranges returns the class's MetalLB ranges holding n addresses per family.
func (c class) Ranges(n int) []string {
	var out []string
	for _, first := range []string{c.V4, c.V6} {
		a := netip.MustParseAddr(first)
		last := a
		for i := 1; i < n; i++ {
			last = last.Next()
		}
		out = append(out, fmt.Sprintf("%s-%s", a, last))
	}
	return out
}

// Object is the class with n addresses per family and w warm reservations
// of each family.
func (c class) Object(n, w int) *iadv1alpha1.IPAddressClass {
	params := fmt.Sprintf(`{"addresses":[%q,%q]}`, c.Ranges(n)[0], c.Ranges(n)[1])
	if w > 0 {
		params = fmt.Sprintf(`{"addresses":[%q,%q],"warmAddresses":%d}`, c.Ranges(n)[0], c.Ranges(n)[1], w)
	}
	return cluster.Class(c.Name, c.Reclaim, params)
}

// Universe reports whether ip lies in a range any soak class ever has: the
// IPs the invariants are about.
func Universe(ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, c := range allClasses() {
		for _, first := range []string{c.V4, c.V6} {
			lo := netip.MustParseAddr(first)
			hi := lo
			for i := 1; i < c.Wide; i++ {
				hi = hi.Next()
			}
			if a.BitLen() == lo.BitLen() && a.Compare(lo) >= 0 && a.Compare(hi) <= 0 {
				return true
			}
		}
	}
	return false
}
