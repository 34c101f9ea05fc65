package stale

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/cozystack/metallb-iad/internal/names"
)

// AllocationFailed is the reason of MetalLB's Event on a Service it
// refused. MetalLB's Events are parsed here and nowhere else.
const AllocationFailed = "AllocationFailed"

// inUseBy precedes, in a refusal, the Services holding the address.
const inUseBy = "address also in use by "

// LatestFailure is the latest AllocationFailed Event about uid, or nil.
func LatestFailure(evs []corev1.Event, uid types.UID) *corev1.Event {
	var latest *corev1.Event
	for i := range evs {
		e := &evs[i]
		if e.Reason != AllocationFailed || e.InvolvedObject.UID != uid {
			continue
		}
		if latest == nil || EventTime(e).After(EventTime(latest)) {
			latest = e
		}
	}
	return latest
}

// Refusal is what MetalLB's AllocationFailed Events say about one version
// of a Service (RefusalOf).
type Refusal struct {
	// Event is MetalLB's latest refusal of that version or a later one
	// (or a repeat, see Earlier); nil when none is on record.
	Event *corev1.Event
	// Ahead reports a refusal of a version later than the one asked
	// about: the caller's copy of the Service is behind.
	Ahead bool
	// Earlier are the refusals on record that were first said about an
	// earlier version, each Event's name with how often it was said.
	Earlier map[string]int32
}

// RefusalOf judges whether MetalLB refused version rv of the Service uid,
// or a later one, from its AllocationFailed Events: by the version each
// Event names (involvedObject.resourceVersion, which orders the versions
// of one object), never by the time. MetalLB's event recorder folds a
// refusal it repeats word for word into the Event first recorded, which
// keeps naming the version of then and only counts the repeat; so an
// Event about an earlier version counts only when it was said more often
// than earlier records, taken while rv or a later version was current (nil:
// none taken).
func RefusalOf(evs []corev1.Event, uid types.UID, rv string, earlier map[string]int32) Refusal {
	var out Refusal
	for i := range evs {
		e := &evs[i]
		if e.Reason != AllocationFailed || e.InvolvedObject.UID != uid {
			continue
		}
		cmp, err := resourceversion.CompareResourceVersion(e.InvolvedObject.ResourceVersion, rv)
		switch {
		case err != nil:
			continue // no version named: nothing to judge it by
		case cmp > 0:
			out.Ahead = true
			continue
		case cmp < 0:
			if out.Earlier == nil {
				out.Earlier = map[string]int32{}
			}
			out.Earlier[e.Name] = Said(e)
			if n, ok := earlier[e.Name]; !ok || Said(e) <= n {
				continue
			}
		}
		if out.Event == nil || EventTime(e).After(EventTime(out.Event)) {
			out.Event = e
		}
	}
	return out
}

// Said is how often an Event was said, whichever API wrote it.
func Said(e *corev1.Event) int32 {
	if e.Series != nil {
		return max(e.Series.Count, 1)
	}
	return max(e.Count, 1)
}

// UnknownPool reports whether an AllocationFailed message says MetalLB
// does not know the pool asked for; any other refusal is for lack of room.
func UnknownPool(msg string) bool { return strings.Contains(msg, "unknown pool") }

// NamesHolders reports whether an AllocationFailed message names the
// Services holding the address.
func NamesHolders(msg string) bool { return strings.Contains(msg, inUseBy) }

// Holders reads, from an AllocationFailed message about ip, the Services
// MetalLB says hold it ("address also in use by ns/a,ns/b"); when it only
// says the port is taken on ip (same sharing key), it returns samePort,
// the candidates the caller knows.
func Holders(msg, ip string, samePort []types.NamespacedName) []types.NamespacedName {
	if i := strings.LastIndex(msg, inUseBy); i >= 0 {
		var out []types.NamespacedName
		for _, s := range strings.Split(msg[i+len(inUseBy):], ",") {
			ns, name, ok := strings.Cut(strings.TrimSpace(s), "/")
			if ok && ns != "" && name != "" {
				out = append(out, types.NamespacedName{Namespace: ns, Name: name})
			}
		}
		return out
	}
	if strings.Contains(msg, "is already in use on \""+ip+"\"") {
		return samePort
	}
	return nil
}

// AssignedTo lists, at most limit, the Services other than self that
// MetalLB's IPAllocated Events say it assigned ip to.
func AssignedTo(evs []corev1.Event, ip string, self types.NamespacedName, limit int) []types.NamespacedName {
	seen := map[types.NamespacedName]bool{self: true}
	var out []types.NamespacedName
	for i := range evs {
		e := &evs[i]
		key := types.NamespacedName{Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name}
		if e.Reason != ReasonIPAllocated || seen[key] || !strings.Contains(e.Message, `"`+ip+`"`) {
			continue
		}
		seen[key] = true
		out = append(out, key)
		if len(out) == limit {
			break
		}
	}
	return out
}

// Assignment is an address MetalLB says it assigned, and when.
type Assignment struct {
	IP string
	At time.Time
}

// Assignments returns, from IPAllocated Events, the Services assigned an
// address keep accepts, with that address and its latest Event. An Event
// is believed only about its own namespace: anyone who may write Events in
// a namespace could name another one's Service.
func Assignments(evs []corev1.Event, keep func(ip string) bool) map[types.NamespacedName]Assignment {
	out := map[types.NamespacedName]Assignment{}
	for i := range evs {
		e := &evs[i]
		if e.Reason != ReasonIPAllocated || e.InvolvedObject.Kind != "Service" || e.InvolvedObject.Namespace != e.Namespace {
			continue
		}
		key := types.NamespacedName{Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name}
		for _, ip := range quotedAddresses(e.Message) {
			if !keep(ip) {
				continue
			}
			if prev, ok := out[key]; !ok || EventTime(e).After(prev.At) {
				out[key] = Assignment{IP: ip, At: EventTime(e)}
			}
		}
	}
	return out
}

// quotedAddresses returns the addresses quoted in a message of MetalLB's
// (`Assigned IP ["10.0.0.1","fd00::1"]`), in the ledger's form.
func quotedAddresses(msg string) []string {
	var out []string
	parts := strings.Split(msg, `"`)
	for i := 1; i < len(parts); i += 2 {
		if a, err := names.ParseAddress(parts[i]); err == nil {
			out = append(out, a.String())
		}
	}
	return out
}

// EventFirstTime is when an Event first happened, whichever API wrote it.
func EventFirstTime(e *corev1.Event) time.Time {
	if !e.FirstTimestamp.IsZero() {
		return e.FirstTimestamp.Time
	}
	return eventRecordTime(e)
}

// EventTime is when an Event last happened, whichever API wrote it.
func EventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	default:
		return eventRecordTime(e)
	}
}

// eventRecordTime is the time of an Event without core/v1 timestamps.
func eventRecordTime(e *corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
