package claim

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// boundByFamily groups the addresses bound to the claim by family; a
// claimRef naming another uid is a stale binding and does not count.
func boundByFamily(c *iadv1alpha1.IPAddressClaim, addrs []iadv1alpha1.IPAddress) map[iadv1alpha1.IPFamily][]*iadv1alpha1.IPAddress {
	out := map[iadv1alpha1.IPFamily][]*iadv1alpha1.IPAddress{}
	for i := range addrs {
		a := &addrs[i]
		if !draw.BindsClaim(a, c.Namespace, c.Name, c.UID) {
			continue
		}
		if f := names.AddressFamily(a.Spec.Address); f != "" {
			out[f] = append(out[f], a)
		}
	}
	return out
}

// step is what the claim controller does next for one family (planFamily).
type step int

const (
	stepNone step = iota
	stepCreatePlaceholder
	stepWaitForMetalLB
	stepRecord
	// stepHandOver: the placeholder's IPAddress is bound, the placeholder
	// not handed over yet.
	stepHandOver
	// stepDropSurplus: the core bound the family another address.
	stepDropSurplus
	// stepWaitForName: the name is taken by another address's hold.
	stepWaitForName
	// stepWaitForCache: the cache has not shown this controller's last
	// patch of the placeholder (planStep decides it, not planFamily).
	stepWaitForCache
)

func (s step) String() string {
	return [...]string{"None", "CreatePlaceholder", "WaitForMetalLB", "Record", "HandOver", "DropSurplus", "WaitForName", "WaitForCache"}[s]
}

// bound reports whether the family holds an address once a step other
// than stepRecord (whose draw says) is taken.
func (s step) bound() bool {
	return s == stepNone || s == stepHandOver || s == stepDropSurplus
}

// planFamily decides the next step for family f from its bound addresses
// and its allocation placeholder (nil: none). Each pass re-derives it, so a
// crash between two steps re-converges.
func planFamily(f iadv1alpha1.IPFamily, bound []*iadv1alpha1.IPAddress, ph *corev1.Service) step {
	if ph == nil {
		if len(bound) > 0 {
			return stepNone
		}
		return stepCreatePlaceholder
	}
	if ph.Labels[marks.LabelPlaceholder] != names.PlaceholderAllocation {
		if len(bound) > 0 {
			return stepNone
		}
		return stepWaitForName
	}
	if len(bound) > 0 {
		if recordedBy(f, bound, ph) != nil {
			return stepHandOver
		}
		return stepDropSurplus
	}
	if draw.AssignedIP(ph, f) == "" {
		return stepWaitForMetalLB
	}
	return stepRecord
}

// recordedBy returns the address among bound that records ph: the one its
// address label names or, before it is labelled, the one of the address
// MetalLB assigned it; nil when none does.
func recordedBy(f iadv1alpha1.IPFamily, bound []*iadv1alpha1.IPAddress, ph *corev1.Service) *iadv1alpha1.IPAddress {
	label, ip := ph.Labels[marks.LabelAddress], draw.AssignedIP(ph, f)
	for _, a := range bound {
		if label != "" {
			if a.Name == label {
				return a
			}
			continue
		}
		if got, err := names.ParseAddress(a.Spec.Address); err == nil && ip != "" && got.String() == ip {
			return a
		}
	}
	return nil
}

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
