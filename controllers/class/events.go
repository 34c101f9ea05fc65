package class

import (
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/internal/classparams"
)

// EventSource is the component name of the class controller's Events.
const EventSource = "metallb-iad-class"

// Event reasons of the class controller, on the class unless said. They
// are stable: people and alerts match on them.
const (
	ReasonRendered          = "Rendered"          // Normal: the pool or advertisement was written or removed
	ReasonInvalidParameters = "InvalidParameters" // Warning: spec.parameters are refused
	ReasonInvalidClassName  = "InvalidClassName"  // Warning: the name cannot make a pool name
	ReasonOverlappingRanges = "OverlappingRanges" // Warning: an older class or another pool overlaps
	// ReasonOverlapsLivePool (Warning): a class with adoptExisting is
	// rendered over a pool this driver did not render; MetalLB serves
	// neither change until the administrator removes the overlap.
	ReasonOverlapsLivePool = "OverlapsLivePool"
	ReasonPoolNameTaken    = "PoolNameTaken" // Warning: something else controls iad-<class>
	// ReasonAddressesInUse (Warning): the new addresses leave out addresses
	// of the rendered pool that IPAddresses of the class still hold.
	ReasonAddressesInUse = "AddressesInUse"
	ReasonRetained       = "Retained" // Normal, on the pool: kept, narrowed, for a class that is gone
)

// msgRendered is the Rendered message: what the class is rendered into and
// the writes ("<op> <Kind> <name>") that made it so.
func msgRendered(namespace string, pool, adv client.Object, params classparams.Parameters, writes []string) string {
	addrs := make([]string, 0, len(params.Addresses))
	for _, a := range params.Addresses {
		addrs = append(addrs, a.Text)
	}
	return fmt.Sprintf("IPAddressPool %s/%s with %s, announced by %s %s: %s",
		namespace, pool.GetName(), strings.Join(addrs, ", "), kindOf(adv), adv.GetName(), strings.Join(writes, ", "))
}

// controlledElsewhereMessage is the PoolNameTaken message.
func controlledElsewhereMessage(desired client.Object, err error) string {
	return fmt.Sprintf("cannot render %s %s/%s: %v", kindOf(desired), desired.GetNamespace(), desired.GetName(), err)
}

// RetainedMessage is the retained-for note on the pool and its Event.
func RetainedMessage(class string, entries []string) string {
	shown := entries
	more := ""
	if len(shown) > 5 {
		more = fmt.Sprintf(" and %d more", len(shown)-5)
		shown = shown[:5]
	}
	return fmt.Sprintf("IPAddressClass %s does not exist (or no longer names this driver); this pool and its advertisement are kept, "+
		"narrowed to the %d address(es) still recorded under that class name (%s%s), so every binding and attachment stays; "+
		"they go when the last of those IPAddresses is deleted, and a class created again with this name takes them over",
		class, len(entries), strings.Join(shown, ", "), more)
}
