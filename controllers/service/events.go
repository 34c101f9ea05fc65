package service

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// Event reasons the service controller records, on Services, IPAddresses,
// claims and classes. They are stable: people and alerts match on them.
const (
	// ReasonAssociated (Normal): the Service is pinned to the claim's addresses.
	ReasonAssociated = "Associated"
	// ReasonDetached (Normal): the Service no longer carries the claim's
	// addresses; they stay bound to the claim unless given up.
	ReasonDetached = "Detached"
	// ReasonReleasing (Normal): MetalLB is being made to take the addresses back.
	ReasonReleasing = "Releasing"
	// ReasonHandingBack (Normal): a detached Service shares the addresses
	// with their placeholders until one holds them again.
	ReasonHandingBack = "HandingBack"
	// ReasonGatewayInOtherNamespace (Warning): the Service is the one a
	// Gateway API implementation runs in its own namespace for a Gateway of
	// another; it attaches no claim.
	ReasonGatewayInOtherNamespace = "GatewayInOtherNamespace"
	// ReasonNamespaceNotAdmitted (Warning): the class of the claim's
	// addresses does not admit the namespace; nothing is attached anew.
	ReasonNamespaceNotAdmitted = "NamespaceNotAdmitted"
	// ReasonClaimNameInvalid (Warning): the annotation's value cannot be
	// the name of a claim.
	ReasonClaimNameInvalid = "ClaimNameInvalid"
	// ReasonClaimNotFound (Warning): the annotation names no claim of the namespace.
	ReasonClaimNotFound = "ClaimNotFound"
	// ReasonClaimDeleted (Normal): the claim is being deleted; the Service is detached.
	ReasonClaimDeleted = "ClaimDeleted"
	// ReasonClaimNotBound (Normal): the claim has no addresses yet.
	ReasonClaimNotBound = "ClaimNotBound"
	// ReasonClaimNotServed (Warning): the claim's addresses are another driver's.
	ReasonClaimNotServed = "ClaimNotServed"
	// ReasonClaimAlreadyAssociated (Warning): another Service carries the claim.
	ReasonClaimAlreadyAssociated = "ClaimAlreadyAssociated"
	// ReasonWaitingForDetach (Normal): the claim is still being detached
	// from another Service; this one gets it after.
	ReasonWaitingForDetach = "WaitingForDetach"
	// ReasonNotLoadBalancer (Warning): MetalLB serves only LoadBalancer Services.
	ReasonNotLoadBalancer = "NotLoadBalancer"
	// ReasonOtherLoadBalancerClass (Warning): the Service's
	// spec.loadBalancerClass hands it to another load balancer than MetalLB.
	ReasonOtherLoadBalancerClass = "OtherLoadBalancerClass"
	// ReasonFamilyMismatch (Warning): the claim's families do not fit the Service's.
	ReasonFamilyMismatch = "FamilyMismatch"
	// ReasonPinnedByHand (Warning): a MetalLB pin the driver did not write
	// names other addresses.
	ReasonPinnedByHand = "PinnedByHand"
	// ReasonAddressConflict (Warning): a Service holds a ledger address its
	// binding does not authorize.
	ReasonAddressConflict = "AddressConflict"
	// ReasonPoolRequestTakenOver (Normal): the Service's own MetalLB pool
	// request went in the same write as the driver's pin.
	ReasonPoolRequestTakenOver = "PoolRequestTakenOver"
	// ReasonAttachStalled (Warning): the attach has waited StallAfter and
	// says for what.
	ReasonAttachStalled = "AttachStalled"
	// ReasonUnclaimedAddress (Warning, on the Service and the class): the
	// Service holds an address of a class's ranges that the ledger does not
	// authorize (unrecorded, or recorded for another binding).
	ReasonUnclaimedAddress = "UnclaimedAddress"
)

// Event reasons of the import of addresses MetalLB assigned to plain
// Services (class parameter adoptExisting).
const (
	// ReasonImported (Normal, on the Service, the claim and the IPAddress).
	ReasonImported = "Imported"
	// ReasonImportSkippedPartlyInRange (Warning): one of two addresses lies
	// in the class's ranges.
	ReasonImportSkippedPartlyInRange = "ImportSkippedPartlyInRange"
	// ReasonImportSkippedDualStack (Warning): a dual-stack import is not built.
	ReasonImportSkippedDualStack = "ImportSkippedDualStack"
	// ReasonImportSkippedSharedIP (Warning): other Services share the address.
	ReasonImportSkippedSharedIP = "ImportSkippedSharedIP"
	// ReasonImportSkippedClaimNameTaken (Warning, on the Service and the
	// claim): a claim of the generated name exists that is not this import's.
	ReasonImportSkippedClaimNameTaken = "ImportSkippedClaimNameTaken"
	// ReasonImportSkippedPinMismatch (Warning): the owner's pin names
	// another address.
	ReasonImportSkippedPinMismatch = "ImportSkippedPinMismatch"
	// ReasonImportFailed (Warning): an import step failed; it is retried.
	ReasonImportFailed = "ImportFailed"
)

// msgAssociated is the Associated Event's message on the Service. problem
// is ShareProblem's answer for a gap handoff.
func msgAssociated(claim, pin, mode, problem string) string {
	if mode == ModeShared {
		return fmt.Sprintf("Attached claim %q: MetalLB is asked for %s (shared handoff: the Service shares the address with its placeholder, which keeps holding it while attached, so it is never unheld, not even when the Service is detached or deleted)", claim, pin)
	}
	if mode == ModeParked {
		return fmt.Sprintf("Attached claim %q: MetalLB is asked for %s (parked handoff: the placeholder holding the address moved to the parking pool, so the address was unheld for a moment and MetalLB made no pass over every Service; it comes back when the Service is detached)", claim, pin)
	}
	return fmt.Sprintf("Attached claim %q: MetalLB is asked for %s (gap handoff: the address was unheld for a moment, because %s)", claim, pin, problem)
}

// grantLabel names the grant label withdrawn, with the class it named.
func grantLabel(class string) string {
	if class == "" {
		return "the grant label"
	}
	return "the grant label " + marks.GrantText(class)
}

// msgReleasing is the Releasing Event's message; release "" is a release
// by withdrawing the grant label of class.
func msgReleasing(ips []string, release, mode, class string) string {
	if release == "" {
		how := ""
		if mode == ModeShared {
			how = " (shared handoff: a placeholder holds the address)"
		}
		return fmt.Sprintf("Detaching %s%s: the driver withdrew its pin and %s, so the class pool no longer admits this Service and MetalLB takes the address back; then the driver's marker is removed",
			strings.Join(ips, ","), how, grantLabel(class))
	}
	if mode == ModeShared {
		return fmt.Sprintf("Detaching %s (shared handoff): a placeholder holds the address, so the pin is set to %q, which MetalLB cannot satisfy, until MetalLB takes the address back from this Service (MetalLB reports AllocationFailed meanwhile); then the pin is removed",
			strings.Join(ips, ","), release)
	}
	return fmt.Sprintf("Detaching %s: the pin is set to %q, which MetalLB cannot satisfy, until MetalLB takes the address back (MetalLB reports AllocationFailed meanwhile); then the pin is removed",
		strings.Join(ips, ","), release)
}

// msgDetached is the detach's one Event; shared says a placeholder held
// the address beside the Service throughout (the shared handoff).
func msgDetached(ip, address string, shared bool) string {
	how := ""
	if shared {
		how = "; shared handoff: a placeholder kept holding the address"
	}
	return fmt.Sprintf("Detached %s (IPAddress %s%s); it stays reserved for its claim", ip, address, how)
}

func msgGivingUp(claim string, ips []string, release string) string {
	return fmt.Sprintf("Claim %q gave up %s: the pin is set to %q, which MetalLB cannot satisfy, until MetalLB takes the address back (MetalLB reports AllocationFailed meanwhile); then the pin is removed",
		claim, strings.Join(ips, ","), release)
}

func msgGivenUp(claim string, ips []string) string {
	return fmt.Sprintf("Claim %q gave up %s: address given up, Service detached (the driver's pin is removed)", claim, strings.Join(ips, ","))
}

func msgGivenUpAddress(namespace, name string) string {
	return fmt.Sprintf("Detached from Service %s/%s: the address is given up", namespace, name)
}

func msgHandingBack(ips []string) string {
	return fmt.Sprintf("Detaching %s (shared handoff): the Service keeps the address, shared with a placeholder, until a placeholder holds it again; then MetalLB takes it back from the Service",
		strings.Join(ips, ","))
}

func msgPoolRequestTakenOver(took, pin string) string {
	return fmt.Sprintf("Removed %s in the same write as the driver's pin to %s: MetalLB refuses a pin to an address the named pool does not hold, "+
		"so the request would take the address away as soon as that pool changes",
		took, pin)
}

func msgUnclaimedService(g grab) string {
	how := fmt.Sprintf("create an IPAddressClaim with className %s in this namespace and set the annotation %s on this Service (drop metallb.io/address-pool and metallb.io/loadBalancerIPs)",
		g.Class, marks.ClaimText())
	if g.Address == "" {
		return fmt.Sprintf("Service holds %s, an address of IPAddressClass %s, without a claim: addresses of this class are given out only through claims. To hold one, %s", g.IP, g.Class, how)
	}
	return fmt.Sprintf("Service holds %s, an address of IPAddressClass %s recorded as IPAddress %s, which does not authorize this Service. To hold an address of this class, %s", g.IP, g.Class, g.Address, how)
}

func msgUnclaimedClass(svc *corev1.Service, g grab) string {
	if g.Address == "" {
		return fmt.Sprintf("Service %s/%s holds %s of this class without a claim (no IPAddress records it): the class's capacity shrinks and claims are bypassed", svc.Namespace, svc.Name, g.IP)
	}
	return fmt.Sprintf("Service %s/%s holds %s of this class (IPAddress %s) without its binding's authority", svc.Namespace, svc.Name, g.IP, g.Address)
}

func msgImportedService(p ImportPlan, namespace string) string {
	how := "the driver pinned it there"
	if p.HandPin != "" {
		how = "its own pin stays and stays the owner's"
	}
	return fmt.Sprintf("Imported %s, which MetalLB had assigned to this Service, into IPAddressClaim %s/%s (IPAddress %s, IPAddressClass %s): "+
		"the Service keeps the address and is attached through the claim; %s", p.IP, namespace, p.ClaimName, p.AddressName, p.Class.Name, how)
}

func msgImportedClaim(p ImportPlan, namespace, service string) string {
	return fmt.Sprintf("Generated to import %s from Service %s/%s (IPAddress %s, IPAddressClass %s); deleting this claim gives the address up",
		p.IP, namespace, service, p.AddressName, p.Class.Name)
}

func msgImportedAddress(p ImportPlan, namespace, service string) string {
	return fmt.Sprintf("Imported from Service %s/%s, to which MetalLB had assigned it; bound to generated claim %s/%s and attached to the Service",
		namespace, service, namespace, p.ClaimName)
}

func msgClaimNameTaken(p ImportPlan, namespace, service string) string {
	return fmt.Sprintf("The driver would generate this claim to import %s from Service %s/%s, but it exists and was not generated for that Service; the import is skipped",
		p.IP, namespace, service)
}

// msgAttachStalled says what an attach has waited for, and how long.
func msgAttachStalled(claim string, waited time.Duration, waitingFor string) string {
	return fmt.Sprintf("The attach of claim %q has not completed in %s: waiting for %s", claim, waited.Round(time.Second), waitingFor)
}

func msgClaimNameInvalid(claim, problem string) string {
	return fmt.Sprintf("the claim annotation names %s, which cannot be the name of an IPAddressClaim (%s); nothing is attached: write the name of a claim of this namespace",
		marks.Shown(claim), problem)
}

func msgNamespaceNotAdmitted(claim, class string) string {
	return fmt.Sprintf("IPAddressClaim %q holds an address of IPAddressClass %q, which does not admit this namespace: the address stays held by the claim and is not attached. "+
		"Ask an administrator to admit the namespace", claim, class)
}

// msgNotLoadBalancer is the NotLoadBalancer Event's message: the Service
// asking for claim is not of type LoadBalancer.
func msgNotLoadBalancer(claim string) string {
	return fmt.Sprintf("Service is not of type LoadBalancer, so claim %q cannot be attached to it: MetalLB only assigns addresses to LoadBalancer Services", claim)
}

// msgOtherLoadBalancerClass is the OtherLoadBalancerClass Event's
// message: the Service's class is class ("(none)" for none), MetalLB's
// metallbClass ("" for none).
func msgOtherLoadBalancerClass(class, metallbClass, claim string) string {
	serves := "the Services without a spec.loadBalancerClass"
	if metallbClass != "" {
		serves = fmt.Sprintf("the Services of spec.loadBalancerClass %q", metallbClass)
	}
	return fmt.Sprintf("spec.loadBalancerClass is %s, and MetalLB serves only %s, so claim %q cannot be attached to this Service; "+
		"a Gateway API implementation sets the class from its own configuration (NGINX Gateway Fabric also when the Gateway's spec.addresses holds an IP)",
		quoteClass(class), serves, claim)
}

func quoteClass(class string) string {
	if class == "(none)" {
		return "unset"
	}
	return strconv.Quote(class)
}

// msgGatewayInOtherNamespace is the GatewayInOtherNamespace Event's
// message; gateway says whose Gateway the Service runs for
// (marks.Gateway.ForeignTo).
func msgGatewayInOtherNamespace(gateway, claim string) string {
	return fmt.Sprintf("Service %s, so claim %q of this namespace is not attached: a Gateway attaches only a claim of its own namespace; run the Gateway's Service in the Gateway's namespace (Envoy Gateway: the GatewayNamespace deploy type) and claim there", gateway, claim)
}

// msgClaimNotFound is the ClaimNotFound Event's message.
func msgClaimNotFound(claim string) string {
	return fmt.Sprintf("IPAddressClaim %q does not exist in this namespace; the Service will be attached when it does and is bound", claim)
}

// msgClaimDeleted is the ClaimDeleted Event's message.
func msgClaimDeleted(claim string) string {
	return fmt.Sprintf("IPAddressClaim %q is being deleted: its addresses are given up (to its reclaim policy) and the Service is detached", claim)
}

// msgClaimNotBound is the ClaimNotBound Event's message; phase is the
// claim's phase (Pending when it has none yet).
func msgClaimNotBound(claim, phase string) string {
	return fmt.Sprintf("IPAddressClaim %q is %s, not Bound yet; the Service will be attached once it is", claim, phase)
}

// msgClaimNotServed is the ClaimNotServed Event's message.
func msgClaimNotServed(claim string) string {
	return fmt.Sprintf("IPAddressClaim %q is bound to addresses of a class another driver serves; this driver only attaches MetalLB addresses", claim)
}

// msgWaitingForDetach is the WaitingForDetach Event's message; holder is
// the Service the claim is being detached from.
func msgWaitingForDetach(claim, holder string) string {
	return fmt.Sprintf("IPAddressClaim %q is still being detached from Service %s; this Service gets it once that is done", claim, holder)
}

// msgClaimAlreadyAssociated is the ClaimAlreadyAssociated Event's message
// on the Service that asks; holder is the Service the claim is attached to.
func msgClaimAlreadyAssociated(claim, holder string) string {
	return fmt.Sprintf("IPAddressClaim %q is already attached to Service %s; remove the annotation there first (a claim serves one Service at a time)", claim, holder)
}

// msgClaimAlreadyAssociatedAddress is the ClaimAlreadyAssociated Event's
// message on the address already attached to holder, when Service
// namespace/name asks for its claim too.
func msgClaimAlreadyAssociatedAddress(namespace, name, claim, holder string) string {
	return fmt.Sprintf("Service %s/%s asks for claim %q, whose address is already attached to Service %s; it gets no pin",
		namespace, name, claim, holder)
}

// msgPinnedByHand is the PinnedByHand Event's message: the Service's own
// MetalLB pin names handPin, not the claim's addresses desired.
func msgPinnedByHand(handPin, claim, desired string) string {
	return fmt.Sprintf("Service already asks MetalLB for %s (metallb.io/loadBalancerIPs or spec.loadBalancerIP, not written by the driver); remove that to attach claim %q (%s)", handPin, claim, desired)
}

// msgDualOnUnknownFamilies is the FamilyMismatch message of a Dual claim
// on a single-stack Service whose families are not defaulted yet.
func msgDualOnUnknownFamilies(claim string) string {
	return fmt.Sprintf("IPAddressClaim %q is Dual (one IPv4 and one IPv6 address) but the Service is single-stack; set spec.ipFamilyPolicy to RequireDualStack, or use a single-family claim", claim)
}

// msgDualOnSingleStack is the FamilyMismatch message of a Dual claim on a
// Service of the one family fam.
func msgDualOnSingleStack(claim string, fam corev1.IPFamily) string {
	return fmt.Sprintf("IPAddressClaim %q is Dual (one IPv4 and one IPv6 address) but the Service is single-stack %s; set spec.ipFamilyPolicy to RequireDualStack with both families, or use an %s claim", claim, fam, fam)
}

// msgOtherFamily is the FamilyMismatch message of a claim of family f on
// a Service of the other family fam.
func msgOtherFamily(claim string, f iadv1alpha1.IPFamily, fam corev1.IPFamily) string {
	return fmt.Sprintf("IPAddressClaim %q holds an %s address but the Service is single-stack %s; use an %s claim, or set spec.ipFamilies to [%s]", claim, f, fam, fam, f)
}

// msgSingleOnDualStack is the FamilyMismatch message of a claim of the one
// family f on a dual-stack Service of families fams.
func msgSingleOnDualStack(claim string, f iadv1alpha1.IPFamily, fams []corev1.IPFamily) string {
	return fmt.Sprintf("IPAddressClaim %q holds only an %s address but the Service is dual-stack (%s, %s) and MetalLB needs an address of each family; use a Dual claim, or make the Service single-stack %s", claim, f, fams[0], fams[1], f)
}

// msgConflict is the Conflict condition's message and the AddressConflict
// Event's on the address: Service svc holds ip without the address's
// binding authorizing it.
func msgConflict(svc *corev1.Service, ip string) string {
	return fmt.Sprintf("Service %s/%s holds %s in MetalLB without this address's binding authorizing it", svc.Namespace, svc.Name, ip)
}

// msgConflictService is the AddressConflict Event's message on the
// Service holding ip, which is IPAddress address bound to claim (nil for
// none).
func msgConflictService(ip, address string, claim *iadv1alpha1.ClaimReference) string {
	binding := "no claim"
	if claim != nil {
		binding = "claim " + claim.Namespace + "/" + claim.Name
	}
	return fmt.Sprintf("Service holds %s, which is IPAddress %s (bound to %s), without that binding authorizing it; remove its pin to %s",
		ip, address, binding, ip)
}

// msgDetachedGone is the Detached Event's message on an address whose
// Service namespace/name was deleted.
func msgDetachedGone(namespace, name string) string {
	return fmt.Sprintf("Detached from Service %s/%s, which was deleted; the address stays reserved for its claim", namespace, name)
}

// msgImportFailed is the ImportFailed Event's message: importing ip failed
// with err, and is retried.
func msgImportFailed(ip string, err error) string {
	return fmt.Sprintf("Importing %s failed, retrying: %v", ip, err)
}

// msgSkippedPartlyInRange is the ImportSkippedPartlyInRange Event's
// message: in lies in class's ranges, out does not.
func msgSkippedPartlyInRange(in []string, class string, out []string) string {
	return fmt.Sprintf("Not imported: the Service holds %s, which lies in the ranges of IPAddressClass %s, and %s, which does not; "+
		"a claim cannot hold both, so neither is imported and the Service keeps them as they are",
		strings.Join(in, ","), class, strings.Join(out, ","))
}

// msgSkippedDualStack is the ImportSkippedDualStack Event's message: the
// Service holds the addresses in of class.
func msgSkippedDualStack(in []string, class string) string {
	return fmt.Sprintf("Not imported: the Service holds two addresses (%s) of IPAddressClass %s; importing a dual-stack Service is not supported, "+
		"so the Service keeps them as they are", strings.Join(in, ","), class)
}

// msgSkippedPinMismatch is the ImportSkippedPinMismatch Event's message:
// the Service holds ip of class, and its own pin asks for handPin.
func msgSkippedPinMismatch(ip, class, handPin string) string {
	return fmt.Sprintf("Not imported: the Service holds %s (IPAddressClass %s) but its own MetalLB pin asks for %s; "+
		"make the pin name the address it holds, or remove it, to have it imported", ip, class, handPin)
}

// msgSkippedSharedIP is the ImportSkippedSharedIP Event's message: others
// share ip of class with the Service.
func msgSkippedSharedIP(ip, class string, others []string) string {
	return fmt.Sprintf("Not imported: %s (IPAddressClass %s) is shared through a MetalLB sharing key with Service %s; "+
		"a claim serves one Service, so the address is left as it is", ip, class, strings.Join(others, ", "))
}

// msgSkippedClaimNameTaken is the ImportSkippedClaimNameTaken Event's
// message on the Service: claim namespace/name, the name the import of ip
// of class would generate, exists and is not this import's.
func msgSkippedClaimNameTaken(ip, class, namespace, name string) string {
	return fmt.Sprintf("Not imported: %s (IPAddressClass %s) would be imported into a generated claim %s/%s, "+
		"but the namespace already has a claim of that name that the driver did not generate for this Service", ip, class, namespace, name)
}
