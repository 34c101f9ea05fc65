package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/parking"
)

// The states one claim, or one attach, passes through, in the order the
// design runs them. The first is the benchmark's own API call; each other
// is the first time the benchmark's informers see an object in that state
// (the watch clock is milliseconds; managedFields and condition times have
// whole seconds only).
var (
	// ClaimStates: created -> stamped by the core -> allocation placeholder
	// drawn -> MetalLB answered it -> IPAddress recorded -> claim Bound.
	ClaimStates = []string{"created", "stamped", "drawn", "MetalLB answered", "IPAddress recorded", "Bound"}
	// AttachStates: Service annotated -> associatedTo written -> hold
	// placeholder parked -> Held False -> Service pinned by the driver ->
	// MetalLB assigned the IP to the Service.
	AttachStates = []string{"annotated", "associated", "hold parked", "unheld", "pinned", "MetalLB assigned"}
)

// Hop is one step of one item: the time from the latest earlier state
// seen to this one.
type Hop struct {
	D time.Duration
	// Seen is false when the state was never seen: the sequence skipped it
	// (a warm claim draws nothing; an attach without the parking pool parks
	// nothing).
	Seen bool
	// Early is true when the state was seen before an earlier one (each
	// kind of object has its own watch, so two states a few milliseconds
	// apart can arrive out of order, and a fallback handoff can pin before
	// it unholds); D is then 0.
	Early bool
}

// Hops turns the instants one item reached each state (the zero time: not
// seen) into its hops: hop i (for i >= 1) runs from the latest instant
// seen among states 0..i-1 to state i. Without the first instant there is
// no hop. The hops seen add up to the last instant minus the first when
// the last state is the latest.
func Hops(at []time.Time) []Hop {
	if len(at) < 2 || at[0].IsZero() {
		return nil
	}
	out := make([]Hop, len(at)-1)
	latest := at[0]
	for i := 1; i < len(at); i++ {
		if at[i].IsZero() {
			continue
		}
		h := Hop{Seen: true, D: at[i].Sub(latest)}
		if h.D < 0 {
			h.D, h.Early = 0, true
		} else {
			latest = at[i]
		}
		out[i-1] = h
	}
	return out
}

// HopSummary is one hop over the items of an operation.
type HopSummary struct {
	Summary
	// Early is how many items saw this state before an earlier one.
	Early int
}

// SummarizeHops summarizes each of the hops of states (len(states)-1) over
// every item's instants; a hop no item saw has N 0.
func SummarizeHops(items [][]time.Time, states int) []HopSummary {
	if states < 2 {
		return nil
	}
	ds := make([][]time.Duration, states-1)
	early := make([]int, states-1)
	for _, at := range items {
		for i, h := range Hops(at) {
			if i >= len(ds) || !h.Seen {
				continue
			}
			ds[i] = append(ds[i], h.D)
			if h.Early {
				early[i]++
			}
		}
	}
	out := make([]HopSummary, states-1)
	for i := range out {
		out[i] = HopSummary{Summary: Summarize(ds[i]), Early: early[i]}
	}
	return out
}

// HopCell formats one hop of an operation of n items: "p50 / p95", "–"
// when no item saw it, and how many did when not all of them.
func HopCell(h HopSummary, n int) string {
	if h.N == 0 {
		return "–"
	}
	s := fmtD(h.P50) + " / " + fmtD(h.P95)
	if h.N < n {
		s += fmt.Sprintf(" (%d of %d)", h.N, n)
	}
	return s
}

// EarlyCell names the hops some items saw out of order, with how many.
func EarlyCell(hs []HopSummary, states []string) string {
	var out []string
	for i, h := range hs {
		if h.Early > 0 && i+1 < len(states) {
			out = append(out, fmt.Sprintf("%s %d", states[i+1], h.Early))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}

// HopHeader is the header of a hop table's columns: one per hop, named by
// the state it ends in.
func HopHeader(states []string) []string {
	out := make([]string, 0, len(states)-1)
	for i := 1; i < len(states); i++ {
		out = append(out, "-> "+strings.ToUpper(states[i]))
	}
	return out
}

// The states as objects show them, read by the watcher on every event of
// the object the key names.

// isStamped: the core stamped the claim with a provisioner.
func isStamped(o client.Object) bool {
	return o.(*iadv1alpha1.IPAddressClaim).Annotations[iadv1alpha1.ProvisionerAnnotation] != ""
}

// exists is met by the first event of an object.
func exists(client.Object) bool { return true }

// isAnswered: MetalLB wrote an address into the placeholder's status.
func isAnswered(o client.Object) bool {
	return len(o.(*corev1.Service).Status.LoadBalancer.Ingress) > 0
}

// isAssociatedTo: the address's associatedTo names the Service ns/name.
func isAssociatedTo(ns, name string) func(client.Object) bool {
	return func(o client.Object) bool {
		w := o.(*iadv1alpha1.IPAddress).Status.AssociatedTo
		return w != nil && w.Kind == "Service" && w.Namespace == ns && w.Name == name
	}
}

// isParked: the hold placeholder asks for the parking pool and no address.
func isParked(o client.Object) bool {
	return marks.Of(o.(*corev1.Service)).Parked(parking.DefaultPool)
}

// isUnheld: the address's Held condition is False.
func isUnheld(o client.Object) bool {
	return meta.IsStatusConditionFalse(o.(*iadv1alpha1.IPAddress).Status.Conditions, conditions.Held)
}

// isPinnedTo: the Service carries the driver's pin to ip (with its
// authorship marker).
func isPinnedTo(ip string) func(client.Object) bool {
	return func(o client.Object) bool {
		a := o.(*corev1.Service).Annotations
		return a[marks.KeyPinnedBy] != "" && slices.Contains(names.SplitIPs(a[marks.KeyPin]), ip)
	}
}

// fmtD prints a duration to the millisecond.
func fmtD(d time.Duration) string { return d.Round(time.Millisecond).String() }
