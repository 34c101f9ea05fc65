package hold

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// What the hold plan reports (docs/design.md §3): its verdict on the Held
// condition, the holders the Granted condition waits for, and the
// workload HoldReleased names. noteHold (held.go) sets them; events.go
// puts them in words.

// heldCode is the plan's verdict on the Held condition; heldWords
// (events.go) gives each its status, reason and message.
type heldCode int

const (
	heldByPlaceholder       heldCode = iota + 1 // True: By, a placeholder, holds the address
	heldBeside                                  // True: By holds it beside For, the attached workload
	heldReleased                                // False: no placeholder holds it; it is For's
	heldReleasedParked                          // False: the same, the hold waiting in the parking pool
	heldTakenElsewhere                          // False: By holds it without the binding's authority
	heldImporting                               // Unknown: By is being imported and keeps it
	waitingForHold                              // Unknown: MetalLB to assign it to By, a placeholder
	waitingPlaceholderGoing                     // Unknown: the placeholder is being deleted
	waitingHandOver                             // Unknown: By, the claim's allocation placeholder, to be handed over
	waitingForEviction                          // Unknown: MetalLB to take it from By, which lacks the grant
	waitingToShare                              // Unknown: MetalLB to let By, a placeholder, share it with With
	waitingForRelease                           // Unknown: By, which the binding authorizes, to release it
	waitingOtherPlaceholder                     // Unknown: By, another claim's placeholder, to give it back
	waitingToShareAttached                      // Unknown: MetalLB to let By, a placeholder, share it with For
)

// released reports whether the verdict releases the address to a workload.
func (c heldCode) released() bool { return c == heldReleased || c == heldReleasedParked }

// waits reports whether the verdict waits for another process (Held Unknown).
func (c heldCode) waits() bool { return c >= heldImporting }

// heldVerdict is what the plan says of Held: a code and what it names.
type heldVerdict struct {
	Code     heldCode
	By, With types.NamespacedName
	For      *iadv1alpha1.WorkloadReference
}

func verdict(code heldCode, by *corev1.Service) *heldVerdict {
	v := &heldVerdict{Code: code}
	if by != nil {
		v.By = types.NamespacedName{Namespace: by.Namespace, Name: by.Name}
	}
	return v
}

// unheld is the Held verdict on an unattached address none of whose live
// placeholders holds it, by who does: a Service without the binding's
// authority (returned too), one with it, another claim's placeholder, or
// nobody.
func (p *planning) unheld() (*heldVerdict, *corev1.Service) {
	var waitingFor, leaving, otherPlaceholder *seen
	for i := range p.hs {
		s := &p.hs[i]
		authorized := marks.Authorizes(p.addr, s.Service)
		switch {
		case s.own:
		case s.Namespace == p.placeholderNamespace:
			// Another claim's allocation placeholder got the address while
			// it was unheld; its claim controller gives it back.
			if otherPlaceholder == nil {
				otherPlaceholder = s
			}
		case p.park.GrantOnly && !s.granted && !authorized:
			// A Service the driver let go, whose association has moved on
			// before MetalLB looked at it again: it is losing the address.
			if leaving == nil {
				leaving = s
			}
		case !authorized:
			return verdict(heldTakenElsewhere, s.Service), s.Service
		case waitingFor == nil:
			waitingFor = s
		}
	}
	switch {
	case leaving != nil && waitingFor == nil:
		return verdict(waitingForEviction, leaving.Service), nil
	case waitingFor != nil && waitingFor.marks.KeyedExactly(p.key):
		w := verdict(waitingToShare, p.live[0].Service)
		w.With = types.NamespacedName{Namespace: waitingFor.Namespace, Name: waitingFor.Name}
		return w, nil
	case waitingFor != nil:
		return verdict(waitingForRelease, waitingFor.Service), nil
	case otherPlaceholder != nil:
		return verdict(waitingOtherPlaceholder, otherPlaceholder.Service), nil
	}
	return verdict(waitingForHold, p.live[0].Service), nil
}

// alreadyReleased reports whether the address reports its hold released.
func alreadyReleased(a *iadv1alpha1.IPAddress) bool {
	c := meta.FindStatusCondition(a.Status.Conditions, conditions.Held)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == conditions.ReasonReleasedForWorkload
}

// releasedFor is the workload the HoldReleased Event names
// once placeholders went or stepped aside for it (moved of them); nil when
// there is no Event to record.
func releasedFor(a *iadv1alpha1.IPAddress, key string, attached *corev1.Service, moved int) *iadv1alpha1.WorkloadReference {
	if w := a.Status.AssociatedTo; w != nil && moved > 0 && !marks.SharesHold(attached, key) {
		return w
	}
	return nil
}

// ungranted are the holders the driver answers for (its placeholders, the
// Services the binding authorizes) that do not carry the class's grant
// label, which a pool that admits only granted Services needs to keep
// their assignments: Granted is True when there is none. Holders without
// authority are not waited for (taking the address from them is the
// grant's point), nor a Service being released or let go, whose label a
// detach withdraws while MetalLB still shows it holding the address.
func ungranted(a *iadv1alpha1.IPAddress, holders []corev1.Service, placeholderNamespace string) []string {
	var missing []string
	for i := range holders {
		s := &holders[i]
		if s.DeletionTimestamp != nil || (s.Namespace != placeholderNamespace && (!marks.Authorizes(a, s) || marks.Of(s).Releasing() || marks.LetGo(a, s))) {
			continue
		}
		if !marks.Of(s).Granted(a.Spec.ClassName) {
			missing = append(missing, s.Namespace+"/"+s.Name)
		}
	}
	slices.Sort(missing)
	return missing
}
