package ipaddress

import (
	"fmt"
	"net/netip"
	"strings"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// Event reasons the IPAddress controller records; people and alerts match
// on them. Each says what it is about and on what it is recorded.
const (
	ReasonAssociationCleared = "AssociationCleared" // Normal, address: associatedTo named a Service that is gone
	ReasonConflictResolved   = "ConflictResolved"   // Normal, address: no unauthorized holder left; phase handed back
	ReasonPinWithdrawn       = "PinWithdrawn"       // Normal, Service: the address was deleted and the driver's pin withdrawn
	ReasonReleasing          = "Releasing"          // Normal, Service: the address is being deleted while the Service holds it (the Service controller's reason too)
	ReasonInvalidAddress     = "InvalidAddress"     // Warning, address: spec.address is not an IP
	ReasonAddressLost        = "AddressLost"        // Warning, address, claim, attached Service: MetalLB's configuration lacks the address
	ReasonAddressRecovered   = "AddressRecovered"   // Normal, the same: the class's pool contains it again
	ReasonAttachmentRefused  = "AttachmentRefused"  // Warning, address and Service: MetalLB refused the pinned attached Service
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
