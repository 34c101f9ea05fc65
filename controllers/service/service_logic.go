package service

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
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

// ShareProblem explains why, under MetalLB's rules for sharing an IP, the
// Service cannot share the claim's addresses with their placeholders for
// the shared handoff; "" when it can. key is the claim's sharing key
// (SharingKeyOf). MetalLB (v0.15) lets Services share an address only when
// all carry the same metallb.io/allow-shared-ip key, their ports
// (protocol and number) do not overlap, and their backend keys agree:
// empty for externalTrafficPolicy Cluster, the selector for Local. The
// placeholder is selectorless with policy Cluster and one port
// (placeholder.Port). On top of that the driver only writes the key on a
// Service that has none of its own, and only pins a Service that carries
// no pin of its own.
func ShareProblem(svc *corev1.Service, key string) string {
	if key == "" {
		return "the claim's addresses are bound to different claim references, so they have no common sharing key"
	}
	if p := HandPin(svc); p != "" {
		return fmt.Sprintf("the Service carries its own MetalLB pin (%s)", p)
	}
	if v, ok := svc.Annotations[names.MetalLBLegacyAllowSharedIP]; ok {
		return fmt.Sprintf("the Service carries its own %s (%q)", names.MetalLBLegacyAllowSharedIP, v)
	}
	if v, ok := svc.Annotations[names.MetalLBAllowSharedIP]; ok && !SharesOurKey(svc) {
		return fmt.Sprintf("the Service carries its own %s (%q)", names.MetalLBAllowSharedIP, v)
	}
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		return "the Service's externalTrafficPolicy is Local, and MetalLB shares an address only between Services with the same backends (the placeholder has none)"
	}
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if proto == placeholder.Port.Protocol && p.Port == placeholder.Port.Port {
			return fmt.Sprintf("the Service uses port %d/%s, which the placeholder holding the address uses too", p.Port, proto)
		}
	}
	return ""
}

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

// SharingKeyOf is the sharing key common to addrs (binding.SharingKey);
// "" when there are none or they disagree.
func SharingKeyOf(addrs []*iadv1alpha1.IPAddress) string {
	key := ""
	for i, a := range addrs {
		k := binding.SharingKey(a)
		if i > 0 && k != key {
			return ""
		}
		key = k
	}
	return key
}

// SharesOurKey reports whether the Service's metallb.io/allow-shared-ip was
// written by the driver: the shared-by marker is present.
func SharesOurKey(svc *corev1.Service) bool {
	_, ok := svc.Annotations[names.AnnotationSharedBy]
	return ok
}

// PinAnnotations is what the driver makes of a Service's annotations when
// it pins the Service for claim: the pin and the pinned-by marker and, with
// a key (the shared handoff), the sharing key and the shared-by marker.
// Without a key (the gap handoff) a sharing key the driver wrote earlier is
// withdrawn. The input is not modified.
func PinAnnotations(in map[string]string, claim, pin, key string) map[string]string {
	out := binding.CloneAnnotations(in)
	out[names.MetalLBLoadBalancerIPs] = pin
	out[names.AnnotationPinnedBy] = claim
	if key != "" {
		out[names.MetalLBAllowSharedIP] = key
		out[names.AnnotationSharedBy] = claim
	} else {
		binding.WithdrawKey(out)
	}
	return out
}

// ReleaseStarted reports whether the release of a Service's addresses has
// been written: with a release pin, the pin is that value; with the grant
// (release empty), neither the pin nor the grant label is left.
func ReleaseStarted(svc *corev1.Service, release string) bool {
	if release != "" {
		return svc.Annotations[names.MetalLBLoadBalancerIPs] == release
	}
	_, pinned := svc.Annotations[names.MetalLBLoadBalancerIPs]
	_, granted := svc.Labels[names.LabelGrant]
	return !pinned && !granted
}

// GrantLabels is a Service's labels with the grant label of class (none
// when class is empty). The input is not modified.
func GrantLabels(in map[string]string, class string) map[string]string {
	if class == "" {
		return in
	}
	out := binding.CloneAnnotations(in)
	out[names.LabelGrant] = class
	return out
}

// UngrantedLabels is a Service's labels without the grant label. The input
// is not modified; a Service without the label keeps its map as it is.
func UngrantedLabels(in map[string]string) map[string]string {
	if _, ok := in[names.LabelGrant]; !ok {
		return in
	}
	out := binding.CloneAnnotations(in)
	delete(out, names.LabelGrant)
	return out
}

// ClassOf is the class of addrs (the class of a claim's addresses); "" when
// there are none.
func ClassOf(addrs []*iadv1alpha1.IPAddress) string {
	for _, a := range addrs {
		if a.Spec.ClassName != "" {
			return a.Spec.ClassName
		}
	}
	return ""
}

// HandedBack reports whether a Service being detached may let MetalLB take
// the address back without leaving it unheld: the address is attached to
// another workload now (it is that workload's to hold), or it is attached
// to none and held again, as both the IPAddress controller reports (Held
// True) and the Service cache shows (one of the address's placeholders
// holds its IP). holders are the Services whose ingress shows the
// address's IP. An address still attached to svc is not handed back.
func HandedBack(a *iadv1alpha1.IPAddress, svc *corev1.Service, holders []corev1.Service, placeholderNamespace string) bool {
	if at := a.Status.AssociatedTo; at != nil {
		return !AssociatedWith(a, svc.Namespace, svc.Name)
	}
	if !conditions.IsTrue(a.Status.Conditions, conditions.Held) {
		return false
	}
	ips := addressIPs([]*iadv1alpha1.IPAddress{a})
	for i := range holders {
		h := &holders[i]
		if binding.Exempt(h, placeholderNamespace) && h.Labels[names.LabelAddress] == a.Name && binding.Holds(h, ips...) {
			return true
		}
	}
	return false
}

// msgAssociated is the Associated Event's message on the Service. problem
// is ShareProblem's answer for a gap handoff.
func msgAssociated(claim, pin, mode, problem string) string {
	if mode == ModeShared {
		return fmt.Sprintf("Attached claim %q: MetalLB is asked for %s (shared handoff: the Service shared the address with its placeholder, so it was never unheld)", claim, pin)
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
			how = " (shared handoff: a placeholder holds the address again)"
		}
		return fmt.Sprintf("Detaching %s%s: the driver withdrew its pin and the grant label %s, so the class pool no longer admits this Service and MetalLB takes the address back; then the driver's marker is removed",
			strings.Join(ips, ","), how, names.LabelGrant)
	}
	if mode == ModeShared {
		return fmt.Sprintf("Detaching %s (shared handoff): a placeholder holds the address again, so the pin is set to %q, which MetalLB cannot satisfy, until MetalLB takes the address back from this Service (MetalLB reports AllocationFailed meanwhile); then the pin is removed",
			strings.Join(ips, ","), release)
	}
	return fmt.Sprintf("Detaching %s: the pin is set to %q, which MetalLB cannot satisfy, until MetalLB takes the address back (MetalLB reports AllocationFailed meanwhile); then the pin is removed",
		strings.Join(ips, ","), release)
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

// PinValue renders IPs as a metallb.io/loadBalancerIPs value: canonical
// forms, IPv4 before IPv6, ascending within a family, no duplicates,
// comma-separated. Text that does not parse is dropped.
func PinValue(ips []string) string {
	var parsed []netip.Addr
	for _, s := range ips {
		ip, err := names.ParseAddress(s)
		if err != nil {
			continue
		}
		parsed = append(parsed, ip)
	}
	// netip orders IPv4 before IPv6, and numerically within a family.
	slices.SortFunc(parsed, func(a, b netip.Addr) int { return a.Compare(b) })
	parsed = slices.Compact(parsed)
	out := make([]string, len(parsed))
	for i, ip := range parsed {
		out[i] = ip.String()
	}
	return strings.Join(out, ",")
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

// HandPin returns the MetalLB pin a Service carries without the driver's
// authorship marker (metallb.io/loadBalancerIPs, its legacy twin, or
// spec.loadBalancerIP), canonicalised with PinValue; "" when the Service
// carries none or the driver wrote it.
func HandPin(svc *corev1.Service) string {
	if _, ours := svc.Annotations[names.AnnotationPinnedBy]; ours {
		return ""
	}
	for _, v := range []string{
		svc.Annotations[names.MetalLBLoadBalancerIPs],
		svc.Annotations[legacyLoadBalancerIPs],
		svc.Spec.LoadBalancerIP,
	} {
		if strings.TrimSpace(v) != "" {
			if p := PinValue(strings.Split(v, ",")); p != "" {
				return p
			}
			return v
		}
	}
	return ""
}

// legacyLoadBalancerIPs is MetalLB's deprecated spelling of the pin annotation.
const legacyLoadBalancerIPs = "metallb.universe.tf/loadBalancerIPs"

// addressIPs returns the canonical IPs of addresses.
func addressIPs(addrs []*iadv1alpha1.IPAddress) []string {
	var out []string
	for _, a := range addrs {
		if ip, err := names.ParseAddress(a.Spec.Address); err == nil {
			out = append(out, ip.String())
		}
	}
	return out
}

// conflictMessage is the Conflict condition's message on an address held by
// an unauthorized Service.
func conflictMessage(svc *corev1.Service, ip string) string {
	return fmt.Sprintf("Service %s/%s holds %s in MetalLB without this address's binding authorizing it", svc.Namespace, svc.Name, ip)
}
