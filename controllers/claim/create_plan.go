package claim

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// drawVerdict is whether a claim's family may ask MetalLB for an address now.
type drawVerdict int

const (
	// drawNow: nothing holds the draw back.
	drawNow drawVerdict = iota
	// drawLeftToCore: an Available address of the class can serve the
	// family. The core binds those before it waits for the driver;
	// drawing now could bind the claim twice in one family.
	drawLeftToCore
	// drawNamespaceFull: the claim's namespace holds, or draws, as many
	// of the class's addresses as the class allows one namespace.
	drawNamespaceFull
	// drawClassFull: the ledger and the draws fill the class's ranges.
	// MetalLB does not retry an allocation it could not make, so it is not
	// asked for what it cannot give.
	drawClassFull
	// drawLedgerUnsettled: an address of the ledger is unheld in MetalLB
	// (a handoff, or a hold being re-armed): MetalLB would hand it to the
	// new placeholder, and the driver would have to give it back.
	drawLedgerUnsettled
)

// drawDecision is decideDraw's verdict, with what the claim is told.
type drawDecision struct {
	verdict   drawVerdict
	available string                 // drawLeftToCore: the Available address
	used      int                    // drawClassFull: what takes room
	size      float64                // drawClassFull: the room in the ranges
	unsettled *iadv1alpha1.IPAddress // drawLedgerUnsettled: the unheld address
}

// decideDraw decides whether family f of a claim of class may ask MetalLB
// for an address, from the class's ledger in f (v, read through the
// ledger's indexes), the cached draws it does not record yet (drawn,
// unrecorded), the draws in flight the cache does not show yet (inflight,
// inFlight) and held (placeholderHolds). It is the whole decision a pass
// makes under the class's lock: the room left is the class's size less the
// ledger, drawn and inflight.
func decideDraw(class *iadv1alpha1.IPAddressClass, f iadv1alpha1.IPFamily, v draw.LedgerView, drawn, inflight int,
	held func(a *iadv1alpha1.IPAddress, ip string) bool) drawDecision {
	if name := availableFor(v.Available); name != "" {
		return drawDecision{verdict: drawLeftToCore, available: name}
	}
	if full, used, size := classFull(class, f, v.Entries, drawn+inflight); full {
		return drawDecision{verdict: drawClassFull, used: used, size: size}
	}
	if a := unsettledAddress(v.Unheld, held); a != nil {
		return drawDecision{verdict: drawLedgerUnsettled, unsettled: a}
	}
	return drawDecision{verdict: drawNow}
}

// availableFor names one of the entries the core may bind (the first by
// name, so that passes agree), "" when there is none.
func availableFor(available []*iadv1alpha1.IPAddress) string {
	name := ""
	for _, a := range available {
		if name == "" || a.Name < name {
			name = a.Name
		}
	}
	return name
}

// classFull reports whether the ledger's entries of family f (being
// deleted included: MetalLB holds them until their teardown) and drawn
// fill the class's ranges, with that count and the ranges' size. A class
// whose parameters do not parse is never full: MetalLB decides then.
func classFull(c *iadv1alpha1.IPAddressClass, f iadv1alpha1.IPFamily, entries, drawn int) (bool, int, float64) {
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
func unsettledAddress(unheld []*iadv1alpha1.IPAddress, heldByPlaceholder func(a *iadv1alpha1.IPAddress, ip string) bool) *iadv1alpha1.IPAddress {
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
func unrecorded(phs []corev1.Service, f iadv1alpha1.IPFamily, records func(ip string) bool) int {
	n := 0
	answered := map[string]bool{}
	for i := range phs {
		if phs[i].Annotations[marks.AnnotationFamily] != string(f) {
			continue
		}
		if ip := draw.AssignedIP(&phs[i], f); ip == "" {
			n++
		} else if !records(ip) {
			answered[ip] = true
		}
	}
	return n + len(answered)
}
