package hold

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// Event reasons the hold records, on the address; people and alerts match
// on them.
const (
	ReasonHoldCreated            = "HoldCreated"           // Normal, address: a hold placeholder was created
	ReasonHoldReleased           = "HoldReleased"          // Normal, address: placeholders deleted for an attached workload
	ReasonPinRepaired            = "PinRepaired"           // Normal, address: a placeholder's pin was corrected
	ReasonAddressTakenElsewhere  = "AddressTakenElsewhere" // Warning, address: another Service holds it, the placeholder cannot
	ReasonStaleAllocationCleared = stale.ReasonCleared     // Normal, address: MetalLB's booking for a Service that is gone was cleared
)

// Messages of Events and conditions, one function each so their text is
// tested.

func workloadName(w *iadv1alpha1.WorkloadReference) string {
	return fmt.Sprintf("%s %s/%s", w.Kind, w.Namespace, w.Name)
}

// heldState is the Held condition in words: status, reason and message.
type heldState struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// heldWords puts the hold plan's verdict on Held in words, for the address
// ip of class; pool is the parking pool.
func heldWords(v *heldVerdict, ip, class, pool string) heldState {
	waiting := func(format string, args ...any) heldState {
		return heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB, fmt.Sprintf(format, args...)}
	}
	switch v.Code {
	case heldByPlaceholder:
		return heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder,
			fmt.Sprintf("MetalLB assigned %s to placeholder Service %s", ip, v.By)}
	case heldBeside:
		return heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload,
			fmt.Sprintf("MetalLB assigned %s to placeholder Service %s, which shares it with %s, the address is attached to (shared attachment): "+
				"detaching or deleting that Service leaves the address held", ip, v.By, workloadName(v.For))}
	case heldReleased:
		return heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload,
			fmt.Sprintf("No placeholder holds the address: it is released for %s", workloadName(v.For))}
	case heldReleasedParked:
		return heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload,
			fmt.Sprintf("No placeholder holds the address: it is released for %s; the hold waits in the parking pool %s and comes back on detach", workloadName(v.For), pool)}
	case heldTakenElsewhere:
		return heldState{metav1.ConditionFalse, conditions.ReasonTakenElsewhere,
			fmt.Sprintf("Service %s holds %s in MetalLB without this address's authority, so the placeholder cannot; "+
				"the driver keeps the placeholder pinned to %s and never substitutes another address", v.By, ip, ip)}
	case heldImporting:
		return heldState{metav1.ConditionUnknown, conditions.ReasonImporting,
			fmt.Sprintf("Service %s holds %s and is being imported into the address's claim; it keeps the address, so no placeholder is created", v.By, ip)}
	case waitingForHold:
		return waiting("Waiting for MetalLB to assign %s to placeholder Service %s", ip, v.By)
	case waitingPlaceholderGoing:
		return waiting("The placeholder of %s is being deleted; a new one is created once it is gone", ip)
	case waitingHandOver:
		return waiting("MetalLB assigned %s to the claim's allocation placeholder %s, which is being handed over to this address", ip, v.By)
	case waitingForEviction:
		return waiting("Waiting for MetalLB to take %s from Service %s, which does not carry %s (the class's pool admits only Services that do), "+
			"before the placeholder holds it again", ip, v.By, marks.GrantText(class))
	case waitingToShare:
		return waiting("Waiting for MetalLB to let placeholder Service %s share %s with Service %s, which this address's binding authorizes (shared handoff)",
			v.By, ip, v.With)
	case waitingForRelease:
		return waiting("Waiting for Service %s, which this address's binding authorizes, to release %s to the placeholder", v.By, ip)
	case waitingOtherPlaceholder:
		return waiting("Placeholder Service %s of another claim got %s while it was unheld; waiting for the claim controller to give it back", v.By, ip)
	case waitingToShareAttached:
		return waiting("Waiting for MetalLB to let placeholder Service %s share %s with %s, the address is attached to (shared attachment)",
			v.By, ip, workloadName(v.For))
	}
	return waiting("Waiting for MetalLB (hold verdict %d)", v.Code)
}

// grantedWords is the Granted condition, missing the holders that do not
// carry the grant label yet (ungranted).
func grantedWords(class string, missing []string) heldState {
	if len(missing) == 0 {
		return heldState{metav1.ConditionTrue, conditions.ReasonHoldersGranted,
			fmt.Sprintf("every Service holding the address for the driver carries %s", marks.GrantText(class))}
	}
	return heldState{metav1.ConditionFalse, conditions.ReasonHolderNotGranted,
		fmt.Sprintf("Service %s holds the address without %s yet; the driver labels it", strings.Join(missing, ", "), marks.GrantText(class))}
}

func msgHoldCreated(ip, namespace, name string) string {
	return fmt.Sprintf("Created placeholder Service %s/%s pinned to %s to hold the address while it is not attached", namespace, name, ip)
}

func msgHoldReleased(w *iadv1alpha1.WorkloadReference, n int) string {
	return fmt.Sprintf("Deleted %d placeholder Service(s) to release the address for %s", n, workloadName(w))
}

func msgPinRepaired(s *corev1.Service, ip string) string {
	return fmt.Sprintf("Placeholder Service %s/%s was pinned to %q; re-pinned it to %s", s.Namespace, s.Name,
		marks.Of(s).Pin, ip)
}

func msgStaleAllocationCleared(ip string, key types.NamespacedName) string {
	return fmt.Sprintf("MetalLB still booked %s for Service %s, which no longer exists (MetalLB missed its deletion while it was starting); "+
		"a Service of that name was created and deleted so that MetalLB lets go of the address", ip, key)
}
