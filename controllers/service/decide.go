package service

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/names"
)

// AssociationFinalizer is the finalizer earlier versions of the service
// controller put on Services they attached. A tenant's Service must never
// wait for a driver controller to be deleted, so the controller no longer
// adds it and removes it wherever it finds it; the associations of a
// deleted Service are cleared after the fact (by this controller and by
// the IPAddress controller).
const AssociationFinalizer = names.Domain + "association"

// Event reasons the service controller records, on Services and on
// IPAddresses. They are stable: people and alerts match on them.
const (
	// ReasonAssociated (Normal): the Service is pinned to the claim's addresses.
	ReasonAssociated = "Associated"
	// ReasonDetached (Normal): the Service no longer carries the claim's
	// addresses; they stay bound to the claim, held in reserve.
	ReasonDetached = "Detached"
	// ReasonReleasing (Normal): the driver is making MetalLB take the
	// claim's addresses back from a Service it detaches.
	ReasonReleasing = "Releasing"
	// ReasonHandingBack (Normal): the Service shares the claim's addresses
	// with their placeholders while it is detached; MetalLB takes them back
	// once a placeholder holds them again.
	ReasonHandingBack = "HandingBack"
	// ReasonClaimNotFound (Warning): the annotation names a claim that does
	// not exist in the Service's namespace, or that is being deleted.
	ReasonClaimNotFound = "ClaimNotFound"
	// ReasonClaimDeleted (Normal): the claim the Service names is being
	// deleted; its addresses are given up and the Service is detached.
	ReasonClaimDeleted = "ClaimDeleted"
	// ReasonClaimNotBound (Normal): the claim exists but has no addresses yet.
	ReasonClaimNotBound = "ClaimNotBound"
	// ReasonClaimNotServed (Warning): the claim's addresses belong to a
	// class another driver serves.
	ReasonClaimNotServed = "ClaimNotServed"
	// ReasonClaimAlreadyAssociated (Warning): another Service already carries
	// the claim's addresses.
	ReasonClaimAlreadyAssociated = "ClaimAlreadyAssociated"
	// ReasonWaitingForDetach (Normal): the claim is still attached to a
	// Service that is being deleted or no longer names it; this Service
	// gets the claim once that detach is done.
	ReasonWaitingForDetach = "WaitingForDetach"
	// ReasonNotLoadBalancer (Warning): the annotated Service is not of type
	// LoadBalancer, so MetalLB would never give it an address.
	ReasonNotLoadBalancer = "NotLoadBalancer"
	// ReasonFamilyMismatch (Warning): the claim's address families do not
	// fit the Service's IP families.
	ReasonFamilyMismatch = "FamilyMismatch"
	// ReasonPinnedByHand (Warning): the Service already carries a MetalLB
	// pin the driver did not write, naming other addresses.
	ReasonPinnedByHand = "PinnedByHand"
	// ReasonAddressConflict (Warning): a Service holds a ledger address its
	// binding does not authorize.
	ReasonAddressConflict = "AddressConflict"
)

// Action is what a reconcile pass does about a Service's association.
type Action int

const (
	// Keep leaves the association exactly as it is.
	Keep Action = iota
	// Detach withdraws the driver's pin and clears associatedTo on every
	// address associated with the Service.
	Detach
	// Associate runs the handoff for the claim the Service names.
	Associate
)

// String names the action for logs.
func (a Action) String() string {
	switch a {
	case Keep:
		return "Keep"
	case Detach:
		return "Detach"
	case Associate:
		return "Associate"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Situation is what a reconcile pass observed about one Service, reduced to
// the facts the association decision depends on.
type Situation struct {
	// Claim is the claim name in the Service's annotation; empty when the
	// Service carries none.
	Claim string
	// Deleting is true once the Service has a deletion timestamp.
	Deleting bool
	// LoadBalancer is true for a Service of type LoadBalancer.
	LoadBalancer bool
	// ClaimFound is true when the claim exists in the Service's namespace.
	ClaimFound bool
	// ClaimDeleting is true when the claim is being deleted.
	ClaimDeleting bool
	// ClaimPhase is the claim's status.phase.
	ClaimPhase iadv1alpha1.IPAddressClaimPhase
	// FamilyProblem explains why the claim's families cannot serve the
	// Service; empty when they fit.
	FamilyProblem string
	// Wanted is how many addresses the claim's family needs (2 for Dual).
	Wanted int
	// Ours counts the claim's bound addresses of classes this driver serves.
	Ours int
	// Foreign counts the claim's bound addresses of classes another driver serves.
	Foreign int
	// AssociatedHere counts the claim's addresses already associated with
	// this Service.
	AssociatedHere int
	// OtherHolder is "<namespace>/<name>" of another live Service one of the
	// claim's addresses is associated with; empty if none.
	OtherHolder string
	// OtherDetaching is true when that Service is being deleted or no longer
	// names the claim: it is on its way out.
	OtherDetaching bool
	// HandPin is a MetalLB pin on the Service that the driver did not write,
	// canonicalised with PinValue; empty if there is none.
	HandPin string
	// Desired is the pin the claim's addresses call for (PinValue).
	Desired string
}

// Verdict is the decision for one pass: the action and, when a person should
// hear about it, the Event to record on the Service.
type Verdict struct {
	Action Action
	// EventType is corev1.EventTypeNormal or corev1.EventTypeWarning; empty
	// when there is nothing to tell.
	EventType string
	// Reason is the Event's reason, one of the Reason constants.
	Reason string
	// Message is the Event's message, written for the Service's owner.
	Message string
}

// Decide is the association decision table. It makes no API calls.
func Decide(s Situation) Verdict {
	switch {
	case s.Deleting || s.Claim == "":
		return Verdict{Action: Detach}
	case !s.LoadBalancer:
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonNotLoadBalancer,
			Message: fmt.Sprintf("Service is not of type LoadBalancer, so claim %q cannot be attached to it: MetalLB only assigns addresses to LoadBalancer Services", s.Claim)}
	case !s.ClaimFound:
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonClaimNotFound,
			Message: fmt.Sprintf("IPAddressClaim %q does not exist in this namespace; the Service will be attached when it does and is bound", s.Claim)}
	case s.ClaimDeleting:
		return Verdict{Action: Detach, EventType: corev1.EventTypeNormal, Reason: ReasonClaimDeleted,
			Message: fmt.Sprintf("IPAddressClaim %q is being deleted: its addresses are given up (to its reclaim policy) and the Service is detached", s.Claim)}
	case s.FamilyProblem != "":
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonFamilyMismatch, Message: s.FamilyProblem}
	case s.ClaimPhase != iadv1alpha1.ClaimBound && s.AssociatedHere > 0:
		// A bound claim that lost one address keeps the rest attached.
		return Verdict{Action: Keep}
	case s.ClaimPhase != iadv1alpha1.ClaimBound:
		phase := string(s.ClaimPhase)
		if phase == "" {
			phase = string(iadv1alpha1.ClaimPending)
		}
		return Verdict{Action: Detach, EventType: corev1.EventTypeNormal, Reason: ReasonClaimNotBound,
			Message: fmt.Sprintf("IPAddressClaim %q is %s, not Bound yet; the Service will be attached once it is", s.Claim, phase)}
	case s.Ours == 0 && s.Foreign > 0:
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonClaimNotServed,
			Message: fmt.Sprintf("IPAddressClaim %q is bound to addresses of a class another driver serves; this driver only attaches MetalLB addresses", s.Claim)}
	case s.Ours < s.Wanted:
		// Bound, but the cache does not show every address yet: the address
		// watch brings the Service back.
		return Verdict{Action: Keep}
	case s.OtherHolder != "" && s.OtherDetaching:
		return Verdict{Action: Detach, EventType: corev1.EventTypeNormal, Reason: ReasonWaitingForDetach,
			Message: fmt.Sprintf("IPAddressClaim %q is still being detached from Service %s; this Service gets it once that is done", s.Claim, s.OtherHolder)}
	case s.OtherHolder != "":
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonClaimAlreadyAssociated,
			Message: fmt.Sprintf("IPAddressClaim %q is already attached to Service %s; remove the annotation there first (a claim serves one Service at a time)", s.Claim, s.OtherHolder)}
	case s.HandPin != "" && s.HandPin != s.Desired:
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonPinnedByHand,
			Message: fmt.Sprintf("Service already asks MetalLB for %s (metallb.io/loadBalancerIPs or spec.loadBalancerIP, not written by the driver); remove that to attach claim %q (%s)", s.HandPin, s.Claim, s.Desired)}
	}
	return Verdict{Action: Associate}
}

// Handoff modes, the values of the "mode" label of metallb_iad_handoffs_total.
const (
	// ModeShared: the workload shares each address with its placeholder
	// for a moment (same MetalLB sharing key), so the address is never
	// held by nobody.
	ModeShared = "shared"
	// ModeGap: the placeholder lets go before the workload takes the
	// address (or the other way round), leaving it unheld for a moment.
	ModeGap = "gap"
)

// AttachMode chooses the handoff that attaches a Service. problem is
// ShareProblem's answer; released is true when a hold was already released
// for the Service (a gap handoff under way: associatedTo recorded, Held
// False); holdsAll is true when the Service already holds every address.
// A Service that can share takes the shared handoff, unless a gap handoff
// is under way and not finished yet, which is then finished as one. For a
// gap handoff, why says why it was not shared.
func AttachMode(problem string, released, holdsAll bool) (mode, why string) {
	switch {
	case problem != "":
		return ModeGap, problem
	case released && !holdsAll:
		return ModeGap, "the placeholder had already let go of the address when the Service became able to share it"
	}
	return ModeShared, ""
}

// DetachMode chooses the handoff that detaches a Service from addresses
// with the canonical ips and sharing key: the shared handoff (a placeholder
// takes the addresses back beside the Service, which keeps them until it
// is released) when the addresses are kept (not given up), the Service
// holds them, carries the driver's sharing key, that key is the
// addresses' key, and nothing else keeps it from sharing (ShareProblem);
// the gap handoff otherwise.
func DetachMode(svc *corev1.Service, ips []string, key string, givingUp bool) string {
	if !givingUp && binding.Holds(svc, ips...) && SharesOurKey(svc) &&
		svc.Annotations[names.MetalLBAllowSharedIP] == key && ShareProblem(svc, key) == "" {
		return ModeShared
	}
	return ModeGap
}

// msgAssociated is the Associated Event's message on the Service. problem
// is ShareProblem's answer for a gap handoff.
func msgAssociated(claim, pin, mode, problem string) string {
	if mode == ModeShared {
		return fmt.Sprintf("Attached claim %q: MetalLB is asked for %s (shared handoff: the Service shares the address with its placeholder, which keeps holding it while attached, so it is never unheld, not even when the Service is detached or deleted)", claim, pin)
	}
	return fmt.Sprintf("Attached claim %q: MetalLB is asked for %s (gap handoff: the address was unheld for a moment, because %s)", claim, pin, problem)
}

// msgAssociatedAddress is the Associated Event's message on an address.
func msgAssociatedAddress(namespace, name, claim, mode string) string {
	return fmt.Sprintf("Attached to Service %s/%s (claim %s/%s, %s handoff)", namespace, name, namespace, claim, mode)
}

// msgReleasing is the Releasing Event's message on the Service.
func msgReleasing(ips []string, release, mode string) string {
	if release == "" {
		how := ""
		if mode == ModeShared {
			how = " (shared handoff: a placeholder holds the address)"
		}
		return fmt.Sprintf("Detaching %s%s: the driver withdrew its pin and the grant label %s, so the class pool no longer admits this Service and MetalLB takes the address back; then the driver's marker is removed",
			strings.Join(ips, ","), how, names.LabelGrant)
	}
	if mode == ModeShared {
		return fmt.Sprintf("Detaching %s (shared handoff): a placeholder holds the address, so the pin is set to %q, which MetalLB cannot satisfy, until MetalLB takes the address back from this Service (MetalLB reports AllocationFailed meanwhile); then the pin is removed",
			strings.Join(ips, ","), release)
	}
	return fmt.Sprintf("Detaching %s: the pin is set to %q, which MetalLB cannot satisfy, until MetalLB takes the address back (MetalLB reports AllocationFailed meanwhile); then the pin is removed",
		strings.Join(ips, ","), release)
}

// msgLettingGo is the Releasing Event's message on a Service detached in
// one write (binding.LetGo).
func msgLettingGo(ips []string, mode string) string {
	how := ""
	if mode == ModeShared {
		how = " (shared handoff: a placeholder keeps holding the address)"
	}
	return fmt.Sprintf("Detaching %s%s: the driver withdrew its pin, sharing key, markers and the grant label %s in one write, so the class pool no longer admits this Service and MetalLB takes the address back; the address stays associated with the Service until it has",
		strings.Join(ips, ","), how, names.LabelGrant)
}

// msgGivingUp is the Releasing Event's message on a Service whose addresses
// are given up (their claim or the addresses themselves are being deleted).
func msgGivingUp(claim string, ips []string, release string) string {
	return fmt.Sprintf("Claim %q gave up %s: the pin is set to %q, which MetalLB cannot satisfy, until MetalLB takes the address back (MetalLB reports AllocationFailed meanwhile); then the pin is removed",
		claim, strings.Join(ips, ","), release)
}

// msgGivenUp is the Detached Event's message on a Service whose addresses
// were given up, once MetalLB took them back and the pin is withdrawn.
func msgGivenUp(claim string, ips []string) string {
	return fmt.Sprintf("Claim %q gave up %s: address given up, Service detached (the driver's pin is removed)", claim, strings.Join(ips, ","))
}

// msgGivenUpAddress is the Detached Event's message on an address given up
// while attached.
func msgGivenUpAddress(namespace, name string) string {
	return fmt.Sprintf("Detached from Service %s/%s: the address is given up", namespace, name)
}

// msgHandingBack is the HandingBack Event's message on the Service.
func msgHandingBack(ips []string) string {
	return fmt.Sprintf("Detaching %s (shared handoff): the Service keeps the address, shared with a placeholder, until a placeholder holds it again; then MetalLB takes it back from the Service",
		strings.Join(ips, ","))
}

// FamilyMismatch explains why a claim of family f cannot serve the Service,
// or returns "" when it can. MetalLB wants exactly one address per family of
// the Service: a single-stack Service takes one address of its own family, a
// dual-stack one an address of each.
func FamilyMismatch(svc *corev1.Service, claim string, f iadv1alpha1.IPFamily) string {
	if f == "" {
		f = iadv1alpha1.FamilyIPv4
	}
	fams := binding.ServiceFamilies(svc)
	policy := corev1.IPFamilyPolicySingleStack
	if svc.Spec.IPFamilyPolicy != nil {
		policy = *svc.Spec.IPFamilyPolicy
	}
	switch {
	case len(fams) == 0:
		// Families unknown (not defaulted yet): only the policy tells.
		if f == iadv1alpha1.FamilyDual && policy == corev1.IPFamilyPolicySingleStack {
			return fmt.Sprintf("IPAddressClaim %q is Dual (one IPv4 and one IPv6 address) but the Service is single-stack; set spec.ipFamilyPolicy to RequireDualStack, or use a single-family claim", claim)
		}
		return ""
	case len(fams) == 1 && f == iadv1alpha1.FamilyDual:
		return fmt.Sprintf("IPAddressClaim %q is Dual (one IPv4 and one IPv6 address) but the Service is single-stack %s; set spec.ipFamilyPolicy to RequireDualStack with both families, or use an %s claim", claim, fams[0], fams[0])
	case len(fams) == 1 && string(fams[0]) != string(f):
		return fmt.Sprintf("IPAddressClaim %q holds an %s address but the Service is single-stack %s; use an %s claim, or set spec.ipFamilies to [%s]", claim, f, fams[0], fams[0], f)
	case len(fams) == 2 && f != iadv1alpha1.FamilyDual:
		return fmt.Sprintf("IPAddressClaim %q holds only an %s address but the Service is dual-stack (%s, %s) and MetalLB needs an address of each family; use a Dual claim, or make the Service single-stack %s", claim, f, fams[0], fams[1], f)
	}
	return ""
}

// Authorized reports whether an address's binding allows the Service to hold
// it: the address is associated with the Service, or (during the handoff,
// before associatedTo is visible everywhere) the Service names the address's
// claim in the claim's namespace and carries the driver's pin for it.
func Authorized(svc *corev1.Service, a *iadv1alpha1.IPAddress) bool {
	return binding.Authorizes(a, svc)
}

// Released reports whether the IPAddress controller has let go of the
// address's hold for a workload: condition Held False, reason
// ReleasedForWorkload.
func Released(a *iadv1alpha1.IPAddress) bool {
	c := meta.FindStatusCondition(a.Status.Conditions, conditions.Held)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == conditions.ReasonReleasedForWorkload
}

// AssociatedWith reports whether the address's associatedTo names the Service.
func AssociatedWith(a *iadv1alpha1.IPAddress, namespace, name string) bool {
	at := a.Status.AssociatedTo
	return at != nil && at.Kind == "Service" && at.Namespace == namespace && at.Name == name
}

// conflictMessage is the Conflict condition's message on an address held by
// an unauthorized Service.
func conflictMessage(svc *corev1.Service, ip string) string {
	return fmt.Sprintf("Service %s/%s holds %s in MetalLB without this address's binding authorizing it", svc.Namespace, svc.Name, ip)
}

// OnePerFamily keeps, of a claim's addresses, one per IP family. A claim
// holds two of a family when the core bound a replacement for an address
// that was Lost (its pool deleted, say) and the lost one then recovered; a
// Service takes one address per family, and MetalLB refuses a pin with two
// of the same. The Service gets, per family, the address that is not Lost,
// then the one already associated with it, then the one it holds, then the
// first by name. The others stay the claim's, each held by its placeholder.
// Addresses whose text does not parse are kept as they are.
func OnePerFamily(addrs []*iadv1alpha1.IPAddress, svc *corev1.Service) []*iadv1alpha1.IPAddress {
	rank := func(a *iadv1alpha1.IPAddress) int {
		r := 0
		if a.Status.Phase != iadv1alpha1.AddressLost {
			r += 4
		}
		if AssociatedWith(a, svc.Namespace, svc.Name) {
			r += 2
		}
		if binding.Holds(svc, a.Spec.Address) {
			r++
		}
		return r
	}
	best := map[bool]*iadv1alpha1.IPAddress{}
	var out []*iadv1alpha1.IPAddress
	for _, a := range addrs {
		ip, err := names.ParseAddress(a.Spec.Address)
		if err != nil {
			out = append(out, a)
			continue
		}
		cur, ok := best[ip.Is4()]
		if !ok || rank(a) > rank(cur) || (rank(a) == rank(cur) && a.Name < cur.Name) {
			best[ip.Is4()] = a
		}
	}
	for _, a := range best {
		out = append(out, a)
	}
	sortByName(out)
	return out
}
