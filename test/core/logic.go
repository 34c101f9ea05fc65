package core

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/names"
)

// The pure decisions of the core: no API calls, table-tested.

// familyOf returns the family of an address's spec.address, and false when
// it does not parse.
func familyOf(address string) (iadv1alpha1.IPFamily, bool) {
	ip, err := names.ParseAddress(address)
	if err != nil {
		return "", false
	}
	if ip.Is4() {
		return iadv1alpha1.FamilyIPv4, true
	}
	return iadv1alpha1.FamilyIPv6, true
}

// heldBy reports whether an address belongs to a claim: its claimRef names
// the claim and its uid is empty or the claim's. A different uid is a stale
// binding to an earlier claim of the same name and is never adopted.
func heldBy(a *iadv1alpha1.IPAddress, c *iadv1alpha1.IPAddressClaim) bool {
	ref := a.Spec.ClaimRef
	return ref != nil && ref.Namespace == c.Namespace && ref.Name == c.Name &&
		(ref.UID == "" || ref.UID == string(c.UID))
}

// collected reports whether a claim's pass counts an address as the
// claim's: held by it and not being deleted. Like the real core, an address
// being deleted is dropped at once, even while its finalizers still hold it.
func collected(a *iadv1alpha1.IPAddress, c *iadv1alpha1.IPAddressClaim) bool {
	return heldBy(a, c) && a.DeletionTimestamp == nil
}

// missingFamilies returns the families the claim asks for that no collected
// address satisfies. A family is satisfied by a collected address of that
// family whose phase is not Lost.
func missingFamilies(want iadv1alpha1.IPFamily, collected []iadv1alpha1.IPAddress) []iadv1alpha1.IPFamily {
	var missing []iadv1alpha1.IPFamily
	for _, f := range want.Families() {
		if !satisfied(f, collected) {
			missing = append(missing, f)
		}
	}
	return missing
}

func satisfied(f iadv1alpha1.IPFamily, collected []iadv1alpha1.IPAddress) bool {
	for i := range collected {
		if af, ok := familyOf(collected[i].Spec.Address); ok && af == f && collected[i].Status.Phase != iadv1alpha1.AddressLost {
			return true
		}
	}
	return false
}

// resolution is the outcome of class resolution: the class, or the reason
// there is none.
type resolution struct {
	Class   *iadv1alpha1.IPAddressClass
	Reason  string
	Message string
}

// resolveClass picks the claim's class: spec.className, else the sticky
// status.className, else the single class annotated as the default.
func resolveClass(c *iadv1alpha1.IPAddressClaim, classes []iadv1alpha1.IPAddressClass) resolution {
	name := c.Spec.ClassName
	if name == "" {
		name = c.Status.ClassName
	}
	if name != "" {
		for i := range classes {
			if classes[i].Name == name {
				return resolved(&classes[i])
			}
		}
		return resolution{Reason: iadv1alpha1.ReasonClassNotFound,
			Message: fmt.Sprintf("IPAddressClass %q does not exist", name)}
	}
	var defaults []*iadv1alpha1.IPAddressClass
	for i := range classes {
		if classes[i].Annotations[iadv1alpha1.DefaultClassAnnotation] == "true" {
			defaults = append(defaults, &classes[i])
		}
	}
	switch len(defaults) {
	case 0:
		return resolution{Reason: iadv1alpha1.ReasonNoDefaultClass,
			Message: "the claim names no class and no IPAddressClass is marked as the default"}
	case 1:
		return resolved(defaults[0])
	default:
		list := make([]string, len(defaults))
		for i, d := range defaults {
			list[i] = d.Name
		}
		sort.Strings(list)
		return resolution{Reason: iadv1alpha1.ReasonMultipleDefaultClasses,
			Message: fmt.Sprintf("the claim names no class and several IPAddressClasses are marked as the default (%s); name one in spec.className", strings.Join(list, ", "))}
	}
}

func resolved(cl *iadv1alpha1.IPAddressClass) resolution {
	return resolution{Class: cl, Reason: iadv1alpha1.ReasonResolved,
		Message: fmt.Sprintf("IPAddressClass %q, provisioner %q", cl.Name, cl.Spec.Provisioner)}
}

// pickCandidate returns the address to bind for one missing family, or nil.
// Candidates are the addresses of the claim's class, only the one named by
// spec.addressName when it is set (an address of another class is never
// bound, as in the real core); only Available, unbound addresses of the
// family qualify, and the smallest name wins.
func pickCandidate(c *iadv1alpha1.IPAddressClaim, family iadv1alpha1.IPFamily, className string, addrs []iadv1alpha1.IPAddress) *iadv1alpha1.IPAddress {
	var best *iadv1alpha1.IPAddress
	for i := range addrs {
		a := &addrs[i]
		if a.Status.Phase != iadv1alpha1.AddressAvailable || a.Spec.ClaimRef != nil || a.DeletionTimestamp != nil {
			continue
		}
		if f, ok := familyOf(a.Spec.Address); !ok || f != family {
			continue
		}
		if a.Spec.ClassName != className || (c.Spec.AddressName != "" && a.Name != c.Spec.AddressName) {
			continue
		}
		if best == nil || a.Name < best.Name {
			best = a
		}
	}
	return best
}

// claimStatus computes a claim's status from scratch out of the addresses
// collected for it and, when the class was looked at in this pass, the
// resolution. Only the sticky className and the conditions' transition times
// carry over from the previous status.
func claimStatus(c *iadv1alpha1.IPAddressClaim, collected []iadv1alpha1.IPAddress, res *resolution) iadv1alpha1.IPAddressClaimStatus {
	st := iadv1alpha1.IPAddressClaimStatus{ClassName: c.Status.ClassName}
	if len(c.Status.Conditions) > 0 {
		st.Conditions = append([]metav1.Condition(nil), c.Status.Conditions...)
	}
	if res != nil {
		status := metav1.ConditionFalse
		if res.Class != nil {
			status = metav1.ConditionTrue
			st.ClassName = res.Class.Name
		}
		conditions.Set(&st.Conditions, iadv1alpha1.ClaimConditionClassResolved, status, res.Reason, res.Message, c.Generation)
	}

	sorted := append([]iadv1alpha1.IPAddress(nil), collected...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, a := range sorted {
		st.Addresses = append(st.Addresses, iadv1alpha1.ClaimedAddress{Name: a.Name, Address: a.Spec.Address})
	}

	missing := missingFamilies(c.Spec.Family, collected)
	lost := lostAddresses(missing, sorted)
	wasBound := c.Status.Phase == iadv1alpha1.ClaimBound || c.Status.Phase == iadv1alpha1.ClaimLost
	switch {
	case len(missing) == 0:
		st.Phase = iadv1alpha1.ClaimBound
		conditions.Set(&st.Conditions, iadv1alpha1.ClaimConditionBound, metav1.ConditionTrue, iadv1alpha1.ReasonBound,
			"every requested family is bound: "+addressList(st.Addresses), c.Generation)
	case wasBound:
		// As in the real core: a once-Bound claim short of a family is
		// Lost, whether or not a Lost address explains it.
		msg := "no address of family " + familyList(missing) + " is bound any more"
		if len(lost) > 0 {
			msg = "the backend lost bound address " + strings.Join(lost, ", ")
		}
		st.Phase = iadv1alpha1.ClaimLost
		conditions.Set(&st.Conditions, iadv1alpha1.ClaimConditionBound, metav1.ConditionFalse, iadv1alpha1.ReasonAddressLost, msg, c.Generation)
	default:
		st.Phase = iadv1alpha1.ClaimPending
		conditions.Set(&st.Conditions, iadv1alpha1.ClaimConditionBound, metav1.ConditionFalse, iadv1alpha1.ReasonWaitingForProvisioning,
			"waiting for an address of family "+familyList(missing), c.Generation)
	}
	return st
}

// lostAddresses names ("name (ip)") the Lost addresses of the missing families.
func lostAddresses(missing []iadv1alpha1.IPFamily, collected []iadv1alpha1.IPAddress) []string {
	var out []string
	for _, a := range collected {
		f, ok := familyOf(a.Spec.Address)
		if !ok || a.Status.Phase != iadv1alpha1.AddressLost {
			continue
		}
		for _, m := range missing {
			if m == f {
				out = append(out, fmt.Sprintf("%s (%s)", a.Name, a.Spec.Address))
			}
		}
	}
	return out
}

func addressList(as []iadv1alpha1.ClaimedAddress) string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Address
	}
	return strings.Join(out, ", ")
}

func familyList(fs []iadv1alpha1.IPFamily) string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	return strings.Join(out, " and ")
}

// claimState is what the address reconcile found about the claim its
// claimRef names.
type claimState int

const (
	// claimAbsent: no such claim, or one with another uid.
	claimAbsent claimState = iota
	// claimHolds: the claim exists with the same uid and is live.
	claimHolds
	// claimDeleting: the claim exists with the same uid and is being deleted.
	claimDeleting
)

// stateOf classifies a claim (nil when missing) against a claimRef uid.
func stateOf(c *iadv1alpha1.IPAddressClaim, uid string) claimState {
	switch {
	case c == nil || uid == "" || string(c.UID) != uid:
		return claimAbsent
	case c.DeletionTimestamp != nil:
		return claimDeleting
	default:
		return claimHolds
	}
}

// addressDecision is what the address reconcile does after its finalizer.
type addressDecision struct {
	// Phase to set; empty leaves the phase alone.
	Phase iadv1alpha1.IPAddressPhase
	// Reclaim applies the address's reclaim policy (its claim is gone).
	Reclaim bool
}

// decideAddress implements the address steps after the finalizer: an
// unparsable address stays Pending; Conflict and Lost belong to the driver;
// no claimRef means Available; a claimRef to the live claim means Bound; an
// empty uid or a claim being deleted means wait; a gone claim means reclaim.
func decideAddress(a *iadv1alpha1.IPAddress, state claimState) addressDecision {
	if _, ok := familyOf(a.Spec.Address); !ok {
		return addressDecision{Phase: iadv1alpha1.AddressPending}
	}
	switch a.Status.Phase {
	case iadv1alpha1.AddressConflict, iadv1alpha1.AddressLost:
		return addressDecision{}
	}
	switch {
	case a.Spec.ClaimRef == nil:
		return addressDecision{Phase: iadv1alpha1.AddressAvailable}
	case a.Spec.ClaimRef.UID == "":
		return addressDecision{}
	case state == claimHolds:
		return addressDecision{Phase: iadv1alpha1.AddressBound}
	case state == claimDeleting:
		return addressDecision{}
	default:
		return addressDecision{Reclaim: true}
	}
}

// liveClaimHolds reports whether an address being deleted must keep its
// protection: it is Bound and its claim is live with the same uid.
func liveClaimHolds(a *iadv1alpha1.IPAddress, state claimState) bool {
	return a.Status.Phase == iadv1alpha1.AddressBound && a.Spec.ClaimRef != nil && state == claimHolds
}

// reclaimAction says how to apply an address's own reclaim policy once its
// claim is gone: Delete deletes the IPAddress; Retain (the default) sets
// phase Released and keeps claimRef, over Conflict and Lost as well (the
// real core does not protect the driver's sticky phases in this path); an
// already Released address needs nothing.
func reclaimAction(a *iadv1alpha1.IPAddress) (del, release bool) {
	if a.Spec.ReclaimPolicy == iadv1alpha1.ReclaimDelete {
		return true, false
	}
	return false, a.Status.Phase != iadv1alpha1.AddressReleased
}
