package ipaddress

import (
	"fmt"
	"net/netip"
	"strings"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// Event reasons the IPAddress controller records; people and alerts match
// on them. Each says what it is about and on what it is recorded.
const (
	ReasonHoldCreated            = "HoldCreated"           // Normal, address: a hold placeholder was created
	ReasonHoldReleased           = "HoldReleased"          // Normal, address: placeholders deleted for an attached workload
	ReasonPinRepaired            = "PinRepaired"           // Normal, address: a placeholder's pin was corrected
	ReasonAssociationCleared     = "AssociationCleared"    // Normal, address: associatedTo named a Service that is gone
	ReasonAddressTakenElsewhere  = "AddressTakenElsewhere" // Warning, address: another Service holds it, the placeholder cannot
	ReasonConflictResolved       = "ConflictResolved"      // Normal, address: no unauthorized holder left; phase handed back
	ReasonPinWithdrawn           = "PinWithdrawn"          // Normal, Service: the address was deleted and the driver's pin withdrawn
	ReasonReleasing              = "Releasing"             // Normal, Service: the address is being deleted while the Service holds it (the Service controller's reason too)
	ReasonInvalidAddress         = "InvalidAddress"        // Warning, address: spec.address is not an IP
	ReasonAddressLost            = "AddressLost"           // Warning, address, claim, attached Service: MetalLB's configuration lacks the address
	ReasonAddressRecovered       = "AddressRecovered"      // Normal, the same: the class's pool contains it again
	ReasonAttachmentRefused      = "AttachmentRefused"     // Warning, address and Service: MetalLB refused the pinned attached Service
	ReasonStaleAllocationCleared = stale.ReasonCleared     // Normal, address: MetalLB's booking for a Service that is gone was cleared
)

// Messages of Events and conditions, one function each so their text is
// tested.

func workloadName(w *iadv1alpha1.WorkloadReference) string {
	return fmt.Sprintf("%s %s/%s", w.Kind, w.Namespace, w.Name)
}

// byClaim names the claim an address was bound to, for messages.
func byClaim(a *iadv1alpha1.IPAddress) string {
	if ref := a.Spec.ClaimRef; ref != nil && ref.Name != "" {
		return fmt.Sprintf(" (claim %s/%s)", ref.Namespace, ref.Name)
	}
	return ""
}

func msgClassGone(a *iadv1alpha1.IPAddress, metallbNamespace string, pool *metallbv1beta1.IPAddressPool) string {
	return fmt.Sprintf("IPAddressClass %s was deleted; IPAddressPool %s/%s is kept for the addresses still recorded under that name, "+
		"so this address stays reserved (and attached, if it is) until it is released; no new claim gets an address of the class",
		a.Spec.ClassName, metallbNamespace, pool.Name)
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

func msgAssociationCleared(w *iadv1alpha1.WorkloadReference) string {
	return fmt.Sprintf("%s no longer exists: cleared the association and re-armed the hold", workloadName(w))
}

func msgConflictResolved(phase iadv1alpha1.IPAddressPhase) string {
	return fmt.Sprintf("No Service holds the address without authority any more; phase handed back to %s", phase)
}

func msgPinWithdrawn(a *iadv1alpha1.IPAddress, ip string) string {
	return fmt.Sprintf("IPAddress %s (%s) was given up%s: address given up, Service detached (the driver's pin is removed)", a.Name, ip, byClaim(a))
}

func msgTeardownReleasing(a *iadv1alpha1.IPAddress, ip, release string) string {
	return fmt.Sprintf("IPAddress %s (%s) is being given up%s: the pin is set to %q, which MetalLB cannot satisfy, until MetalLB takes the address back (MetalLB reports AllocationFailed meanwhile); then the pin is removed",
		a.Name, ip, byClaim(a), release)
}

func msgInvalidAddress(address string, err error) string {
	return fmt.Sprintf("spec.address %q is not an IP address (%v); nothing can hold it", address, err)
}

func msgAddressLostOn(a *iadv1alpha1.IPAddress, message string) string {
	return fmt.Sprintf("IPAddress %s (%s) is Lost: %s", a.Name, a.Spec.Address, message)
}

func msgAddressRecovered(a *iadv1alpha1.IPAddress, metallbNamespace string, phase iadv1alpha1.IPAddressPhase) string {
	return fmt.Sprintf("IPAddressPool %s/%s contains %s again: IPAddress %s is %s again and keeps the same IP",
		metallbNamespace, names.PoolName(a.Spec.ClassName), a.Spec.Address, a.Name, phase)
}

func msgStaleAllocationCleared(ip string, key types.NamespacedName) string {
	return fmt.Sprintf("MetalLB still booked %s for Service %s, which no longer exists (MetalLB missed its deletion while it was starting); "+
		"a Service of that name was created and deleted so that MetalLB lets go of the address", ip, key)
}

// msgRefusedPrefix starts the AttachmentServed message of MetalLB's
// refusal of Service key; planServing also reads it back, to tell whose
// refusal a condition reports.
func msgRefusedPrefix(key string) string { return fmt.Sprintf("Attached to Service %s, ", key) }

// msgRefused is the AttachmentServed condition's message (and the
// Warning's) when MetalLB refused Service key the address ip it is pinned
// to, saying refused.
func msgRefused(key, ip, refused string) string {
	return msgRefusedPrefix(key) + fmt.Sprintf("which is pinned to %s but holds none of it: MetalLB refused it the address (%q). "+
		"The driver repairs what it wrote (its pin, a pool request it takes over); anything else on the Service that contradicts the pin must be removed",
		ip, refused)
}

// msgNotRefused is the AttachmentServed condition's message once no
// refusal stands: held says the attached Service holds the address.
func msgNotRefused(held bool) string {
	if held {
		return "The Service the address is attached to holds it"
	}
	return "The address is not attached to a Service MetalLB refuses"
}

// msgLostClassDeleted is the Lost condition's message when class
// className was deleted and its pool metallbNamespace/poolName is gone
// too, taking ip with it.
func msgLostClassDeleted(className, metallbNamespace, poolName string, ip netip.Addr) string {
	return fmt.Sprintf("IPAddressClass %s was deleted and IPAddressPool %s/%s does not exist: MetalLB no longer has %s "+
		"and took it from whoever held it. The address comes back with the same IP when a class of that name serves a range containing it again",
		className, metallbNamespace, poolName, ip)
}

// msgLostPoolMissing is the Lost condition's message when the pool
// metallbNamespace/poolName of ip's class does not exist.
func msgLostPoolMissing(metallbNamespace, poolName string, ip netip.Addr) string {
	return fmt.Sprintf("IPAddressPool %s/%s does not exist: MetalLB no longer has %s and took it from whoever held it. "+
		"The address comes back with the same IP when the pool is rendered again", metallbNamespace, poolName, ip)
}

// msgLostOutsidePool is the Lost condition's message when the pool
// metallbNamespace/poolName (its entries addresses) does not contain ip.
func msgLostOutsidePool(metallbNamespace, poolName string, addresses []string, ip netip.Addr) string {
	return fmt.Sprintf("IPAddressPool %s/%s (%s) does not contain %s: MetalLB took it from whoever held it. "+
		"The address comes back with the same IP when the pool contains it again", metallbNamespace, poolName,
		strings.Join(addresses, ", "), ip)
}

// msgClassReturned is the ClassGone condition's message when a class
// named className is back.
func msgClassReturned(className string) string {
	return fmt.Sprintf("IPAddressClass %s exists again and serves the address", className)
}
