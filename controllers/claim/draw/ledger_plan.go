package draw

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// The ledger's own indexes on the IPAddress informer's store (ledger.go):
// a draw decision reads a class's entries in one family through them, a
// count and the few entries it decides on, never the whole ledger.
const (
	// ledgerEntries: every entry, under ledgerKey.
	ledgerEntries = "metallb-iad.claim/ledger"
	// ledgerAvailable: the entries the core may bind (isAvailable).
	ledgerAvailable = "metallb-iad.claim/ledger.available"
	// ledgerUnheld: the entries that may be unsettled (mayBeUnheld).
	ledgerUnheld = "metallb-iad.claim/ledger.unheld"
)

// ledgerKey is the key of a class's entries of one family.
func ledgerKey(class string, f iadv1alpha1.IPFamily) string { return class + "\x00" + string(f) }

// isAvailable reports whether the core may bind the entry to a claim:
// Available, bound to none, not being deleted.
func isAvailable(a *iadv1alpha1.IPAddress) bool {
	return a.Status.Phase == iadv1alpha1.AddressAvailable && a.Spec.ClaimRef == nil && a.DeletionTimestamp == nil
}

// mayBeUnheld reports whether MetalLB might hand the entry's address out
// right now unless one of its placeholders holds it: not being deleted,
// neither Lost (outside the pool) nor in Conflict, not attached and not
// reported Held.
func mayBeUnheld(a *iadv1alpha1.IPAddress) bool {
	if a.DeletionTimestamp != nil || names.AddressFamily(a.Spec.Address) == "" {
		return false
	}
	switch a.Status.Phase {
	case iadv1alpha1.AddressLost, iadv1alpha1.AddressConflict:
		return false
	}
	return a.Status.AssociatedTo == nil && !conditions.IsTrue(a.Status.Conditions, conditions.Held)
}

// ledgerIndexes are the index functions of the ledger's indexes: each
// names the keys an entry is found under.
func ledgerIndexes() map[string]func(a *iadv1alpha1.IPAddress) []string {
	family := func(a *iadv1alpha1.IPAddress) []string {
		return []string{ledgerKey(a.Spec.ClassName, names.AddressFamily(a.Spec.Address))}
	}
	when := func(keep func(*iadv1alpha1.IPAddress) bool) func(a *iadv1alpha1.IPAddress) []string {
		return func(a *iadv1alpha1.IPAddress) []string {
			if !keep(a) {
				return nil
			}
			return family(a)
		}
	}
	return map[string]func(a *iadv1alpha1.IPAddress) []string{
		ledgerEntries:   family,
		ledgerAvailable: when(isAvailable),
		ledgerUnheld:    when(mayBeUnheld),
	}
}

// LedgerView is what a draw decision reads of one class's ledger in one
// family: how many entries it has, the few that may decide the draw, and
// whether it records an address.
type LedgerView struct {
	// Entries counts the entries, being deleted included: MetalLB holds
	// them until their teardown.
	Entries int
	// Available are the entries the core may bind (isAvailable).
	Available []*iadv1alpha1.IPAddress
	// Unheld are the entries that may be unsettled (mayBeUnheld).
	Unheld []*iadv1alpha1.IPAddress
	// Records reports whether the class's ledger records ip (canonical).
	Records func(ip string) bool
}

// ViewOf builds the view of class's ledger in family f from its entries,
// as the indexes do: for the tests, and for a caller holding a list.
func ViewOf(addrs []iadv1alpha1.IPAddress, class string, f iadv1alpha1.IPFamily) LedgerView {
	v := LedgerView{}
	ips := map[string]bool{}
	for i := range addrs {
		a := &addrs[i]
		if a.Spec.ClassName != class {
			continue
		}
		if ip, err := names.ParseAddress(a.Spec.Address); err == nil {
			ips[ip.String()] = true
		}
		if names.AddressFamily(a.Spec.Address) != f {
			continue
		}
		v.Entries++
		if isAvailable(a) {
			v.Available = append(v.Available, a)
		}
		if mayBeUnheld(a) {
			v.Unheld = append(v.Unheld, a)
		}
	}
	v.Records = func(ip string) bool { return ips[ip] }
	return v
}

// classFull reports whether the ledger's entries of family f (being
// deleted included: MetalLB holds them until their teardown) and drawn
// fill the class's ranges, with that count and the ranges' size. A class
// whose parameters do not parse is never full: MetalLB decides then.
func ClassFull(c *iadv1alpha1.IPAddressClass, f iadv1alpha1.IPFamily, entries, drawn int) (bool, int, float64) {
	p, err := classparams.ParseParameters(c.Spec.Parameters)
	if err != nil {
		return false, 0, 0
	}
	v4, v6 := classparams.FamilySizes(p.Addresses)
	size := v4
	if f == iadv1alpha1.FamilyIPv6 {
		size = v6
	}
	used := entries + drawn
	return float64(used) >= size, used, size
}

// unsettledAddress names an entry MetalLB might hand out right now: one
// of those that may be unheld (mayBeUnheld) that none of its placeholders
// holds (heldByPlaceholder). Nil when all are settled.
func UnsettledAddress(unheld []*iadv1alpha1.IPAddress, heldByPlaceholder func(a *iadv1alpha1.IPAddress, ip string) bool) *iadv1alpha1.IPAddress {
	for _, a := range unheld {
		ip, err := names.ParseAddress(a.Spec.Address)
		if err != nil || heldByPlaceholder(a, ip.String()) {
			continue
		}
		return a
	}
	return nil
}

// unrecorded counts the placeholders of family f of a class whose address
// the ledger does not record (yet, records): each takes room the ledger
// misses.
func Unrecorded(phs []corev1.Service, f iadv1alpha1.IPFamily, records func(ip string) bool) int {
	n := 0
	answered := map[string]bool{}
	for i := range phs {
		if phs[i].Annotations[marks.AnnotationFamily] != string(f) {
			continue
		}
		if ip := AssignedIP(&phs[i], f); ip == "" {
			n++
		} else if !records(ip) {
			answered[ip] = true
		}
	}
	return n + len(answered)
}
