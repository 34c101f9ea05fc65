package classparams

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// MaxClassNameLength is the longest class name this driver serves: the
// pool name "iad-<class>" must fit in 63 characters, the limit of a label
// value (the class name is also written into the LabelClass label).
const MaxClassNameLength = 63 - len("iad-")

// CheckName refuses a class whose name cannot be turned into a MetalLB
// pool name and a label value.
func CheckName(class string) error {
	pool := names.PoolName(class)
	if len(class) > MaxClassNameLength {
		return fmt.Errorf("the class name %q is %d characters long; this driver serves class names of at most %d characters, so that the pool name %q stays within 63",
			class, len(class), MaxClassNameLength, pool)
	}
	if errs := validation.IsDNS1123Subdomain(pool); len(errs) > 0 {
		return fmt.Errorf("the pool name %q is not a valid object name: %s", pool, strings.Join(errs, ", "))
	}
	if errs := validation.IsValidLabelValue(class); len(errs) > 0 {
		return fmt.Errorf("the class name %q is not a valid label value: %s", class, strings.Join(errs, ", "))
	}
	return nil
}

// createdBefore reports whether class a was created before class b: by
// creationTimestamp, then by name when both were created in the same second.
// Of two of our classes whose addresses overlap, the older one keeps them.
func createdBefore(a, b *iadv1alpha1.IPAddressClass) bool {
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.Name < b.Name
}

// Occupant is something that already holds addresses a class must not
// overlap: an older class of this driver, or an IPAddressPool that exists in
// the MetalLB namespace (MetalLB refuses its whole configuration when two
// pools overlap, so no rendering may ever create that).
type Occupant struct {
	// Class is the class holding the ranges (for a pool: the class it was
	// rendered for, empty if it is not the driver's).
	Class string
	// Pool is the name of the existing IPAddressPool; empty when the ranges
	// are an older class's parameters.
	Pool string
	// Ranges are the occupied addresses.
	Ranges []AddressRange
}

// describe names the occupant in a message.
func (o Occupant) describe() string {
	switch {
	case o.Pool == "":
		return fmt.Sprintf("the older class %q", o.Class)
	case o.Class != "":
		return fmt.Sprintf("IPAddressPool %s (rendered for class %q)", o.Pool, o.Class)
	default:
		return fmt.Sprintf("IPAddressPool %s (not rendered by this driver)", o.Pool)
	}
}

// Overlap is the first overlap found between a class and an occupant.
type Overlap struct {
	// Ours is the class's range, Theirs the occupant's.
	Ours, Theirs AddressRange
	// With is the occupant.
	With Occupant
}

// Error words the overlap for an Event.
func (o *Overlap) Error() string {
	return fmt.Sprintf("addresses %s overlap %s of %s; refusing to render overlapping ranges", o.Ours, o.Theirs, o.With.describe())
}

// FindOverlap returns the first overlap between ours and the occupants, in
// the order given (ranges in order within each), or nil.
func FindOverlap(ours []AddressRange, occupants []Occupant) *Overlap {
	for _, occ := range occupants {
		for _, r := range ours {
			for _, t := range occ.Ranges {
				if r.overlaps(t) {
					return &Overlap{Ours: r, Theirs: t, With: occ}
				}
			}
		}
	}
	return nil
}

// PoolRanges parses the addresses of an existing IPAddressPool, skipping
// entries that do not parse (MetalLB would refuse them itself).
func PoolRanges(addresses []string) []AddressRange {
	var out []AddressRange
	for _, a := range addresses {
		if r, err := ParseAddressRange(a); err == nil {
			out = append(out, r)
		} else if r, ok := hostCIDR(a); ok {
			out = append(out, r)
		}
	}
	return out
}

// hostCIDR reads a CIDR with host bits set as its network, as MetalLB does.
func hostCIDR(s string) (AddressRange, bool) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil || p.Addr().Is4In6() {
		return AddressRange{}, false
	}
	p = p.Masked()
	return AddressRange{Start: p.Addr(), End: lastOf(p), Text: p.String()}, true
}

// OlderClasses are the occupants a class's addresses must not overlap among
// the driver's classes: the parameters of every older class of this driver
// that is not being deleted, has a valid name and parses, oldest first.
func OlderClasses(class *iadv1alpha1.IPAddressClass, classes []iadv1alpha1.IPAddressClass) []Occupant {
	older := make([]*iadv1alpha1.IPAddressClass, 0, len(classes))
	for i := range classes {
		c := &classes[i]
		if c.Name == class.Name || c.Spec.Provisioner != names.Provisioner || !c.DeletionTimestamp.IsZero() || !createdBefore(c, class) {
			continue
		}
		older = append(older, c)
	}
	slices.SortFunc(older, func(a, b *iadv1alpha1.IPAddressClass) int {
		if createdBefore(a, b) {
			return -1
		}
		return 1
	})
	var out []Occupant
	for _, c := range older {
		if CheckName(c.Name) != nil {
			continue
		}
		if p, err := ParseParameters(c.Spec.Parameters); err == nil {
			out = append(out, Occupant{Class: c.Name, Ranges: p.Addresses})
		}
	}
	return out
}

// Refusal says why the class controller refuses to render a class, judged
// from the driver's classes alone: its name, its parameters, or ranges
// overlapping an older class of this driver; "" when none of these refuses
// it. (An overlap with a MetalLB pool the driver did not render needs the
// pools, which only the class controller reads.) The claim controller uses
// it to tell a claim why its class's pool will not appear.
func Refusal(class *iadv1alpha1.IPAddressClass, classes []iadv1alpha1.IPAddressClass) string {
	if err := CheckName(class.Name); err != nil {
		return err.Error()
	}
	params, err := ParseParameters(class.Spec.Parameters)
	if err != nil {
		return err.Error()
	}
	if o := FindOverlap(params.Addresses, OlderClasses(class, classes)); o != nil {
		return o.Error()
	}
	return ""
}

// Foreign reports whether the occupant is an IPAddressPool this driver did
// not render.
func (o Occupant) Foreign() bool { return o.Pool != "" && o.Class == "" }

// SplitAdoptable splits the occupants a class must not overlap into those
// that refuse it and those it may overlap. A class with adoptExisting may
// overlap pools this driver did not render: that is how it takes over
// what MetalLB assigned from them. MetalLB refuses its whole configuration
// while two pools overlap and keeps serving the last valid one, so nothing
// changes on the wire until the administrator removes the class's ranges
// from those pools, and then MetalLB loads both changes at once and keeps
// every assignment the class's pool covers. Older classes and pools the
// driver rendered always refuse.
func SplitAdoptable(occupants []Occupant, adoptExisting bool) (refusing, adoptable []Occupant) {
	for _, o := range occupants {
		if adoptExisting && o.Foreign() {
			adoptable = append(adoptable, o)
			continue
		}
		refusing = append(refusing, o)
	}
	return refusing, adoptable
}

// AdoptOverlapMessage is the Warning Event of a class with adoptExisting
// rendered over the ranges of a pool this driver did not render.
func AdoptOverlapMessage(o *Overlap, pool string) string {
	return fmt.Sprintf("addresses %s overlap %s of %s; rendered %s anyway because adoptExisting is on. "+
		"MetalLB refuses its whole configuration while two pools overlap and keeps serving the last valid one, "+
		"so %s is not served yet (nothing changes on the wire). Once the Services holding these addresses are imported "+
		"(Imported and ImportSkipped* Events), remove the class's ranges from %s (or delete it) in one edit",
		o.Ours, o.Theirs, o.With.describe(), pool, pool, o.With.Pool)
}
