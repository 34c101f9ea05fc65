package claim

import (
	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
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
// InFlight) and held (Holds). It is the whole decision a pass
// makes under the class's lock: the room left is the class's size less the
// ledger, drawn and inflight.
func decideDraw(class *iadv1alpha1.IPAddressClass, f iadv1alpha1.IPFamily, v draw.LedgerView, drawn, inflight int,
	held func(a *iadv1alpha1.IPAddress, ip string) bool) drawDecision {
	if name := availableFor(v.Available); name != "" {
		return drawDecision{verdict: drawLeftToCore, available: name}
	}
	if full, used, size := draw.ClassFull(class, f, v.Entries, drawn+inflight); full {
		return drawDecision{verdict: drawClassFull, used: used, size: size}
	}
	if a := draw.UnsettledAddress(v.Unheld, held); a != nil {
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
