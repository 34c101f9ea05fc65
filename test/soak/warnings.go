package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Warnings: the soak counts every Warning Event the driver records, by
// reason and object, and asks of each what in the storm explains it. A
// healthy operation records none, so a Warning is explained only by the
// storm's own bad input (by design, at any time), by an operation that
// damages or takes away what the Warning is about (within causeWindow of
// it), or by a fault (within its stretch); a repeat of an explained
// Warning about the same object is explained as the first was.

// CheckWarnings is the invariant that every Warning is explained.
const CheckWarnings = "warning-explained"

// causeWindow is how long after an operation or a MetalLB restart ends the
// Warnings it explains may come: the driver's passes, MetalLB's full
// passes (and its backoff) and a leader's failover, with room for a
// machine busy with other work: the bound means "not caused by it", not
// "slow".
const causeWindow = time.Minute

// restartWindow is how long after a controller or the API server is back
// its fault explains Warnings: a standby's lease and its caches' sync, on
// a busy machine.
const restartWindow = 30 * time.Second

// window is how long after e ends it explains Warnings.
func (e stormEvent) window() time.Duration {
	if e.Fault && e.Kind != faultMetalLB {
		return restartWindow
	}
	return causeWindow
}

// Fault targets besides the controllers.
const (
	faultMetalLB   = "metallb"
	faultAPIServer = "apiserver"
)

// warningCause says what in the storm explains a Warning reason.
type warningCause struct {
	// design: the storm makes it on purpose (bad input, small pools), so
	// it is explained about any of the storm's objects of these kinds.
	design []string
	// ops are the storm's operations that explain it, about an object of
	// the operation's class when the object's class is known.
	ops []string
	// faults are the fault targets that explain it within their stretch.
	faults []string
}

// Operations that take addresses away from MetalLB's configuration.
var poolDamage = []string{"pool-delete", "pool-edit", "class-shrink", "class-recreate"}

// Operations that make a Service hold what the ledger does not let it.
var holderDamage = []string{"rogue-create", "placeholder-edit", "placeholder-delete"}

// warningCauses is the verdict for every Warning reason the driver records
// (TestWarningTable keeps it complete). A reason with no cause is never
// explained: the soak's storm never does what it reports.
var warningCauses = map[string]warningCause{
	// The class controller: the storm's parameters and names are valid and
	// its classes' ranges disjoint.
	"InvalidParameters": {},
	"InvalidClassName":  {},
	"OverlappingRanges": {},
	"OverlapsLivePool":  {},
	"PoolNameTaken":     {},
	"AddressesInUse":    {ops: []string{"class-shrink"}},
	// The claim controller: pools of 8 addresses run out by design.
	"PoolExhausted":  {design: []string{"IPAddressClaim"}, faults: []string{faultMetalLB}},
	"PoolNotReady":   {ops: poolDamage, faults: []string{faultMetalLB, faultAPIServer}},
	"ClassNotServed": {ops: []string{"class-recreate"}},
	"LedgerMismatch": {ops: append(append([]string{"address-recycle"}, poolDamage...), holderDamage...), faults: []string{faultMetalLB}},
	"WarmPoolFull":   {ops: []string{"class-warm"}, design: []string{"IPAddressClass"}},
	// No soak class names namespaces or bounds them.
	"NamespaceNotAdmitted": {},
	"NamespaceLimit":       {},
	// The IPAddress controller.
	"AddressTakenElsewhere": {ops: append(append([]string{}, holderDamage...), poolDamage...), faults: []string{faultMetalLB}},
	"InvalidAddress":        {},
	"AddressLost":           {ops: poolDamage},
	"AttachmentRefused":     {ops: append(append([]string{}, holderDamage...), poolDamage...), faults: []string{faultMetalLB}},
	// The Service controller: tenants name claims at random, of any family,
	// that may not exist or be attached elsewhere.
	"ClaimNotFound":          {design: []string{"Service"}},
	"ClaimNameInvalid":       {},
	"ClaimNotServed":         {},
	"ClaimAlreadyAssociated": {design: []string{"Service", "IPAddress"}},
	"NotLoadBalancer":        {},
	// The storm's Services name no load-balancer class.
	"OtherLoadBalancerClass": {},
	// The soak runs no Gateway API implementation.
	"GatewayInOtherNamespace": {},
	"FamilyMismatch":          {design: []string{"Service"}},
	"PinnedByHand":            {},
	"AddressConflict":         {ops: holderDamage},
	"UnclaimedAddress":        {ops: append(append([]string{}, holderDamage...), poolDamage...)},
	// An attach that waits a minute: something it waits for is down or
	// damaged.
	"AttachStalled": {ops: append(append([]string{}, holderDamage...), poolDamage...),
		faults: []string{faultMetalLB, faultAPIServer, "service", "ipaddress"}},
	// Imports: no soak class imports.
	"ImportSkippedPartlyInRange":  {},
	"ImportSkippedDualStack":      {},
	"ImportSkippedSharedIP":       {},
	"ImportSkippedClaimNameTaken": {},
	"ImportSkippedPinMismatch":    {},
	"ImportFailed":                {},
}

// warning is one Warning said: a new Event, or a repeat counted on one.
type warning struct {
	Reason, Kind, Namespace, Name, Source, Message string
	At                                             time.Time
	// Class is the soak class the object belongs to, "" when unknown.
	Class string
	// Repeat: the same reason about the same object was said before.
	Repeat bool
}

func (w warning) object() string {
	if w.Namespace == "" || w.Kind == "IPAddress" || w.Kind == "IPAddressClass" {
		return w.Kind + " " + w.Name
	}
	return fmt.Sprintf("%s %s/%s", w.Kind, w.Namespace, w.Name)
}

// stormEvent is an operation or a fault of the storm, with the class it
// was about ("" for none or any).
type stormEvent struct {
	Kind       string
	Class      string
	Fault      bool
	Start, End time.Time
}

// explain returns what explains w, "" for nothing; explained holds the
// reason-and-object of the Warnings explained so far.
func explain(w warning, history []stormEvent, explained map[string]string) string {
	key := w.Reason + " " + w.object()
	if why, ok := explained[key]; ok && w.Repeat {
		return why + " (again)"
	}
	c := warningCauses[w.Reason]
	for _, k := range c.design {
		if k == w.Kind {
			return "the storm's design"
		}
	}
	for _, h := range history {
		if w.At.Before(h.Start) || w.At.After(h.End.Add(h.window())) {
			continue
		}
		if h.Fault {
			for _, f := range c.faults {
				if f == h.Kind {
					return "fault " + h.Kind
				}
			}
			// A restarted recorder (or one whose requests failed) says
			// again what it said before.
			if w.Repeat {
				if _, ok := explained[key]; ok {
					return "fault " + h.Kind + ", said again"
				}
			}
			continue
		}
		for _, op := range c.ops {
			if op == h.Kind && (h.Class == "" || w.Class == "" || h.Class == w.Class) {
				return "operation " + h.Kind
			}
		}
	}
	return ""
}

// stretch is a part of the run: during a fault (and its window after it),
// or free of faults.
type stretch struct {
	Start, End  time.Time
	Faults      []string
	ByReason    map[string]int
	Unexplained []string
}

// stretches cuts [from, to] into fault stretches and fault-free ones.
func stretches(history []stormEvent, from, to time.Time) []*stretch {
	var faults []stormEvent
	for _, h := range history {
		if h.Fault {
			faults = append(faults, h)
		}
	}
	sort.Slice(faults, func(i, j int) bool { return faults[i].Start.Before(faults[j].Start) })
	var out []*stretch
	cur := from
	for i := 0; i < len(faults); {
		f := faults[i]
		s := &stretch{Start: f.Start, End: f.End.Add(f.window()), ByReason: map[string]int{}}
		for ; i < len(faults) && !faults[i].Start.After(s.End); i++ {
			s.Faults = append(s.Faults, faults[i].Kind)
			if e := faults[i].End.Add(faults[i].window()); e.After(s.End) {
				s.End = e
			}
		}
		if s.Start.After(cur) {
			out = append(out, &stretch{Start: cur, End: s.Start, ByReason: map[string]int{}})
		}
		out = append(out, s)
		cur = s.End
	}
	if to.After(cur) {
		out = append(out, &stretch{Start: cur, End: to, ByReason: map[string]int{}})
	}
	return out
}

// judgeWarnings explains every Warning, counts them per stretch of the
// run from start to end, and returns the stretches and the unexplained.
func judgeWarnings(ws []warning, history []stormEvent, start, end time.Time) ([]*stretch, []string) {
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].At.Before(ws[j].At) })
	parts := stretches(history, start, end)
	explained := map[string]string{}
	var bad []string
	for _, w := range ws {
		var in *stretch
		for _, s := range parts {
			if !w.At.Before(s.Start) && w.At.Before(s.End) {
				in = s
			}
		}
		if in == nil {
			in = parts[len(parts)-1]
		}
		in.ByReason[w.Reason]++
		why := explain(w, history, explained)
		if why == "" {
			d := fmt.Sprintf("%s on %s at %s (%s): %s", w.Reason, w.object(), w.At.Format("15:04:05.000"), w.Source, w.Message)
			in.Unexplained = append(in.Unexplained, d)
			bad = append(bad, d)
			continue
		}
		key := w.Reason + " " + w.object()
		if _, ok := explained[key]; !ok {
			explained[key] = why
		}
	}
	return parts, bad
}

// describe renders a stretch for the report.
func (s *stretch) describe(t0 time.Time) string {
	what := "no fault"
	if len(s.Faults) > 0 {
		what = "faults " + strings.Join(s.Faults, ", ")
	}
	n := 0
	var reasons []string
	for r, k := range s.ByReason {
		n += k
		reasons = append(reasons, fmt.Sprintf("%s %d", r, k))
	}
	sort.Strings(reasons)
	return fmt.Sprintf("%6.1fs-%6.1fs  %-40s warnings %3d, unexplained %d  %s", s.Start.Sub(t0).Seconds(), s.End.Sub(t0).Seconds(),
		what, n, len(s.Unexplained), strings.Join(reasons, ", "))
}
