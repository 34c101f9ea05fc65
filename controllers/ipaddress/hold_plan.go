package ipaddress

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// heldState is a value of the Held condition.
type heldState struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

func waiting(msg string) *heldState {
	return &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB, msg}
}

func released(w *iadv1alpha1.WorkloadReference) *heldState {
	return &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload, msgReleased(w)}
}

// parkOpt is what the plan knows of the pools: the parking pool's name
// (internal/parking), which marks a parked placeholder, whether that pool
// can take a placeholder of the address's family now, and whether the
// class pool admits only Services with the class's grant label.
type parkOpt struct {
	Pool string
	Open bool
	// GrantOnly: MetalLB takes the address from a Service without the
	// grant label at its next look, whatever the driver does.
	GrantOnly bool
}

// holdPlan is what the holding invariant asks for in one pass.
type holdPlan struct {
	Create bool              // create the hold placeholder
	Repair []*corev1.Service // pin, grant label or key not the address's (a parked one comes back)
	Key    string            // the placeholders' sharing key (holdKey), "" for none
	Delete []*corev1.Service // for a workload that cannot share, or surplus
	Park   []*corev1.Service // to step aside to the parking pool for the attached workload
	// Held is the condition to report; nil leaves it as it is.
	Held *heldState
	// TakenBy holds the address without authority, so the hold cannot.
	TakenBy *corev1.Service
	// Parking: a parked placeholder still holds the address, until MetalLB
	// moves it to the parking pool.
	Parking bool
}

// planHold decides what the holding invariant asks for. key is the
// address's sharing key (marks.Keys.Of), before its key under the secret
// this controller held before a rotation ("" when none), placeholders are
// the address's own, holders every Service MetalLB assigned ip to, attached
// the Service associatedTo names (nil when the cache does not show it),
// attaching the one the attach grant names.
func planHold(a *iadv1alpha1.IPAddress, ip, key, before, placeholderNamespace string, park parkOpt, placeholders, holders []corev1.Service, attached, attaching *corev1.Service) holdPlan {
	live := liveOnly(placeholders)
	if len(placeholders) == 0 {
		if ph := recordingPlaceholder(a, ip, placeholderNamespace, holders); ph != nil {
			return planRecording(a, ip, ph)
		}
	}
	if w := a.Status.AssociatedTo; w != nil {
		return planAttached(a, ip, key, placeholderNamespace, park, w, attached, placeholders)
	}
	switch {
	case len(placeholders) == 0:
		return planMissing(a, ip, key, placeholderNamespace, park, holders, attaching)
	case len(live) == 0:
		return holdPlan{Held: waiting(msgPlaceholderGoing(ip))}
	}
	p := holdPlan{Key: holdKey(key, before, live, sharing(a, key, park.Open, attaching, holders, placeholders))}
	if anyParked(live, park.Pool) && heldByOthers(ip, placeholders, holders) {
		// Pinned back now, the placeholder would find the address taken,
		// lose its parking address too and cost MetalLB a full pass.
		p.Held, p.TakenBy = unheld(a, ip, key, placeholderNamespace, park.GrantOnly, placeholders, live, holders)
		return p
	}
	var holder *corev1.Service
	if p.Repair, holder = repairsAndHolder(a, ip, p.Key, live); holder != nil {
		p.Delete = surplus(ip, live, holder)
		p.Held = &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder, msgHeld(ip, holder)}
		return p
	}
	// A parked hold pinned back is reported Unknown at once, not left
	// False: Held False for a workload is what lets the next attach pin,
	// and the returning hold is about to take the address.
	p.Held, p.TakenBy = unheld(a, ip, key, placeholderNamespace, park.GrantOnly, placeholders, live, holders)
	return p
}

// liveOnly are the placeholders not being deleted.
func liveOnly(placeholders []corev1.Service) []*corev1.Service {
	var live []*corev1.Service
	for i := range placeholders {
		if placeholders[i].DeletionTimestamp == nil {
			live = append(live, &placeholders[i])
		}
	}
	return live
}

// planRecording plans an address whose claim's allocation placeholder holds
// it and is not handed over yet: the claim controller records the address
// first, so neither a hold nor a release is due.
func planRecording(a *iadv1alpha1.IPAddress, ip string, ph *corev1.Service) holdPlan {
	if a.Status.AssociatedTo != nil {
		return holdPlan{Held: waiting(msgBeingHandedOver(ip, ph))}
	}
	return holdPlan{Held: &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder, msgHeld(ip, ph)}}
}

// planAttached plans an attached address: nothing moves while its Service
// leaves, the hold stays in a shared attachment, and otherwise the
// placeholders park when the parking pool can take them (the parked
// handoff) or go (the gap handoff).
func planAttached(a *iadv1alpha1.IPAddress, ip, key, placeholderNamespace string, park parkOpt, w *iadv1alpha1.WorkloadReference, attached *corev1.Service, placeholders []corev1.Service) holdPlan {
	live, total := liveOnly(placeholders), len(placeholders)
	switch {
	case attached != nil && (attached.DeletionTimestamp != nil || marks.LetGo(a, attached)):
		return planLeaving(a, ip, w, live, total)
	case marks.SharesHold(attached, key):
		return planShared(a, ip, key, placeholderNamespace, w, attached, live, total)
	case total == 0:
		return holdPlan{Held: released(w)}
	case park.Open:
		return planParking(ip, park.Pool, w, placeholders, live)
	}
	return holdPlan{Delete: live}
}

// planParking plans the gap handoff of an address whose placeholders step
// aside to the parking pool instead of going: MetalLB moves each to a
// parking address and frees ip without a pass over every Service. The
// hold counts as released once no placeholder holds ip any more.
func planParking(ip, pool string, w *iadv1alpha1.WorkloadReference, placeholders []corev1.Service, live []*corev1.Service) holdPlan {
	var p holdPlan
	for _, s := range live {
		if !marks.Of(s).Parked(pool) {
			p.Park = append(p.Park, s)
		}
	}
	// Held is left as it is while a placeholder still holds ip: it does
	// hold it until MetalLB moves it, so Held is written once, False, when
	// the address is free for the workload.
	if len(p.Park) > 0 {
		return p
	}
	for i := range placeholders {
		if marks.Holds(&placeholders[i], ip) {
			p.Parking = true
			return p
		}
	}
	p.Held = &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload, msgReleasedParked(w, pool)}
	return p
}

// anyParked reports whether a live placeholder is parked in pool.
func anyParked(live []*corev1.Service, pool string) bool {
	return slices.ContainsFunc(live, func(s *corev1.Service) bool { return marks.Of(s).Parked(pool) })
}

// heldByOthers reports whether a Service other than the address's own
// placeholders holds ip.
func heldByOthers(ip string, placeholders, holders []corev1.Service) bool {
	for i := range holders {
		if marks.Holds(&holders[i], ip) && !slices.ContainsFunc(placeholders, func(p corev1.Service) bool {
			return p.Namespace == holders[i].Namespace && p.Name == holders[i].Name
		}) {
			return true
		}
	}
	return false
}

// planMissing plans an unattached address without placeholders: a hold is
// created unless the address is being imported from the Service holding it.
func planMissing(a *iadv1alpha1.IPAddress, ip, key, placeholderNamespace string, park parkOpt, holders []corev1.Service, attaching *corev1.Service) holdPlan {
	if h := importingHolder(a, ip, placeholderNamespace, holders); h != nil {
		return holdPlan{Held: &heldState{metav1.ConditionUnknown, conditions.ReasonImporting, msgImporting(ip, h)}}
	}
	return holdPlan{Create: true, Key: holdKey(key, "", nil, sharing(a, key, park.Open, attaching, holders, nil)),
		Held: waiting(msgWaiting(ip, placeholderNamespace, placeholder.HoldName(a.Name)))}
}

// surplus are the live placeholders besides holder that do not hold ip.
func surplus(ip string, live []*corev1.Service, holder *corev1.Service) []*corev1.Service {
	var out []*corev1.Service
	for _, s := range live {
		if s != holder && !marks.Holds(s, ip) {
			out = append(out, s)
		}
	}
	return out
}

// unheld is the Held condition of an unattached address none of whose live
// placeholders holds it, by who does: a Service without the binding's
// authority (returned too), one with it, another claim's placeholder, or
// nobody.
func unheld(a *iadv1alpha1.IPAddress, ip, key, placeholderNamespace string, grantOnly bool, placeholders []corev1.Service, live []*corev1.Service, holders []corev1.Service) (*heldState, *corev1.Service) {
	ours := map[string]bool{}
	for i := range placeholders {
		ours[placeholders[i].Namespace+"/"+placeholders[i].Name] = true
	}
	var waitingFor, leaving, otherPlaceholder *corev1.Service
	for i := range holders {
		s := &holders[i]
		switch {
		case ours[s.Namespace+"/"+s.Name]:
		case s.Namespace == placeholderNamespace:
			// Another claim's allocation placeholder got the address while
			// it was unheld; its claim controller gives it back.
			if otherPlaceholder == nil {
				otherPlaceholder = s
			}
		case grantOnly && !marks.Of(s).Granted(a.Spec.ClassName) && !marks.Authorizes(a, s):
			// A Service the driver let go, whose association has moved on
			// before MetalLB looked at it again: it is losing the address.
			if leaving == nil {
				leaving = s
			}
		case !marks.Authorizes(a, s):
			return &heldState{metav1.ConditionFalse, conditions.ReasonTakenElsewhere, msgTakenElsewhere(ip, s)}, s
		case waitingFor == nil:
			waitingFor = s
		}
	}
	switch {
	case leaving != nil && waitingFor == nil:
		return waiting(msgWaitingForEviction(ip, leaving, a.Spec.ClassName)), nil
	case waitingFor != nil && marks.Of(waitingFor).KeyedExactly(key):
		return waiting(msgWaitingToShare(ip, live[0], waitingFor)), nil
	case waitingFor != nil:
		return waiting(msgWaitingForRelease(ip, waitingFor)), nil
	case otherPlaceholder != nil:
		return waiting(msgHeldByOtherPlaceholder(ip, otherPlaceholder)), nil
	}
	return waiting(msgWaiting(ip, live[0].Namespace, live[0].Name)), nil
}

// recordingPlaceholder returns the allocation placeholder of the claim a
// is bound to (by uid) that MetalLB assigned ip and that is not handed over
// to a yet (labelled with another address or none); nil when there is none.
func recordingPlaceholder(a *iadv1alpha1.IPAddress, ip, placeholderNamespace string, holders []corev1.Service) *corev1.Service {
	ref := a.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return nil
	}
	for i := range holders {
		s := &holders[i]
		if s.Namespace != placeholderNamespace || s.DeletionTimestamp != nil ||
			s.Labels[names.LabelPlaceholder] != names.PlaceholderAllocation || s.Labels[names.LabelClaimUID] != ref.UID {
			continue
		}
		if l := s.Labels[names.LabelAddress]; (l == "" || l == a.Name) && marks.Holds(s, ip) {
			return s
		}
	}
	return nil
}

// planShared plans a shared attachment: the placeholder keeps holding the
// address beside the Service. A missing one is created once the Service
// holds the address (it then shares it at once: same key, ports apart).
func planShared(a *iadv1alpha1.IPAddress, ip, key, placeholderNamespace string, w *iadv1alpha1.WorkloadReference, attached *corev1.Service, live []*corev1.Service, total int) holdPlan {
	p := holdPlan{Key: key}
	switch {
	case total == 0 && !marks.Holds(attached, ip):
		// The Service takes the address first (a gap handoff finished by
		// a Service that became able to share on the way).
		p.Held = released(w)
	case total == 0:
		p.Create = true
		p.Held = waiting(msgWaitingToShareAttached(ip, placeholderNamespace, placeholder.HoldName(a.Name), w))
	case len(live) == 0:
		p.Held = waiting(msgPlaceholderGoing(ip))
	default:
		var holder *corev1.Service
		if p.Repair, holder = repairsAndHolder(a, ip, p.Key, live); holder == nil {
			p.Held = waiting(msgWaitingToShareAttached(ip, live[0].Namespace, live[0].Name, w))
			return p
		}
		p.Delete = surplus(ip, live, holder)
		p.Held = &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload, msgSharedWithWorkload(ip, holder, w)}
	}
	return p
}

// planLeaving plans an address whose attached Service is being deleted or
// was let go (marks.LetGo): nothing is created or deleted, since the
// association is cleared next; only Held follows what holds the address.
func planLeaving(a *iadv1alpha1.IPAddress, ip string, w *iadv1alpha1.WorkloadReference, live []*corev1.Service, total int) holdPlan {
	for _, s := range live {
		if marks.Holds(s, ip) {
			return holdPlan{Held: &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload, msgSharedWithWorkload(ip, s, w)}}
		}
	}
	if total == 0 {
		return holdPlan{Held: released(w)}
	}
	return holdPlan{}
}

// repairsAndHolder returns, among live placeholders, those to repair (pin,
// grant label or sharing key not the address's) and the first that holds ip.
func repairsAndHolder(a *iadv1alpha1.IPAddress, ip, key string, live []*corev1.Service) (repair []*corev1.Service, holder *corev1.Service) {
	for _, s := range live {
		if m := marks.Of(s); !m.PinnedExactly(ip) || !m.KeyedExactly(key) || !m.Granted(a.Spec.ClassName) {
			repair = append(repair, s)
		}
		if holder == nil && marks.Holds(s, ip) {
			holder = s
		}
	}
	return repair, holder
}

// pairKey is the key the address is shared under (marks.PairKey): key, or
// the one the attached Service, or a holder handing the address back,
// already shares it under since before a rotation of the secret.
func pairKey(a *iadv1alpha1.IPAddress, key, ip string, attached *corev1.Service, holders, placeholders []corev1.Service) string {
	if attached != nil {
		return marks.PairKey(attached, key, ip)
	}
	for i := range holders {
		h := &holders[i]
		if k := marks.PairKey(h, key, ip); k != key && handingBack(a, k, h, placeholders) {
			return k
		}
	}
	return key
}

// holdKey is the sharing key of the hold placeholders: the binding's when a
// workload shares or is about to share the address with them (share), or
// when one carries it already (taking a key back costs MetalLB a full pass
// over every Service, as giving it does); none otherwise, so an unshared
// claim costs MetalLB one single-Service allocation. The binding's key
// under the secret before a rotation (before) is replaced by the new one in
// one write: stripped first, a workload attaching at once would have the
// hold written twice, and MetalLB, still on the first write, would refuse
// the workload its address. Any other key (another binding's, one written
// by hand) is taken away.
func holdKey(key, before string, live []*corev1.Service, share bool) string {
	if share {
		return key
	}
	for _, s := range live {
		if m := marks.Of(s); m.KeyedExactly(key) || (before != "" && m.KeyedExactly(before)) {
			return key
		}
	}
	return ""
}

// sharing reports whether a workload is about to share the unattached
// address with its hold: the Service being attached takes the shared
// handoff (sharesSoon; never while the hold can park, parked), or a holder
// hands the address back in it.
func sharing(a *iadv1alpha1.IPAddress, key string, parked bool, attaching *corev1.Service, holders, placeholders []corev1.Service) bool {
	if !parked && sharesSoon(a, attaching) {
		return true
	}
	for i := range holders {
		if handingBack(a, key, &holders[i], placeholders) {
			return true
		}
	}
	return false
}

// sharesSoon reports whether svc, the Service the attach grant names, asks
// for the claim and can share the address (the Service controller's test):
// the hold then needs the key before the Service is pinned.
func sharesSoon(a *iadv1alpha1.IPAddress, svc *corev1.Service) bool {
	ref := a.Spec.ClaimRef
	if svc == nil || svc.DeletionTimestamp != nil || ref == nil || !marks.Of(svc).Asks(a) {
		return false
	}
	return marks.ServiceShareProblem(svc) == ""
}

// alreadyReleased reports whether the address reports its hold released.
func alreadyReleased(a *iadv1alpha1.IPAddress) bool {
	c := meta.FindStatusCondition(a.Status.Conditions, conditions.Held)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == conditions.ReasonReleasedForWorkload
}

// holdWait is, in a few words for the log, what the hold waits for once
// the plan is written; "" for nothing. Each is a change another process
// makes (MetalLB, the Service or claim controller, the API server deleting
// a placeholder), which the Service watch brings back.
func holdWait(p holdPlan) string {
	switch {
	case p.Create:
		return "MetalLB to assign the address to the new hold placeholder"
	case len(p.Park) > 0 || p.Parking:
		return "MetalLB to move the placeholders to the parking pool"
	case len(p.Delete) > 0:
		return "the deleted placeholders to go"
	case p.TakenBy != nil:
		return "the Service holding the address without authority to let it go"
	case p.Held == nil:
		return "the attached Service to leave"
	case p.Held.Reason == conditions.ReasonImporting:
		return "the Service controller to import the address"
	case p.Held.Status == metav1.ConditionUnknown:
		return "the hold to settle (the Held condition says on what)"
	}
	return ""
}

// recheckAttached reports whether the plan drops an attached address's
// placeholders for the gap handoff. The cache may miss the key written
// before the association (a shared attachment keeps its hold), or a detach
// that cleared the association before the key: the API server is asked.
func recheckAttached(a *iadv1alpha1.IPAddress, key string, p holdPlan, attached *corev1.Service) bool {
	return a.Status.AssociatedTo != nil && len(p.Delete)+len(p.Park) > 0 && !marks.SharesHold(attached, key)
}

// recheckPlaceholders reports whether the plan creates a placeholder or
// newly reports the hold released (the Service controller pins on that):
// the API server is asked first whether the cache missed a placeholder.
func recheckPlaceholders(a *iadv1alpha1.IPAddress, p holdPlan) bool {
	return p.Create || (p.Held != nil && p.Held.Reason == conditions.ReasonReleasedForWorkload && !alreadyReleased(a))
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

// rightfulHolder is the workload that should hold the address beside its
// placeholders: the attached Service or, while a shared handoff attaches
// the address, the Service being attached (MetalLB may refuse it for an
// allocation kept from a former holder with the same key and port).
func rightfulHolder(a *iadv1alpha1.IPAddress, key string, attached, attaching *corev1.Service) *corev1.Service {
	if a.Status.AssociatedTo == nil && marks.SharesHold(attaching, key) {
		return attaching
	}
	return attached
}

// renderHold is the hold placeholder of an address: pinned to exactly ip,
// drawing from the class pool, with the sharing key when key is not empty,
// labelled with the address name and owner-referenced to it.
func renderHold(namespace string, a *iadv1alpha1.IPAddress, ip netip.Addr, key string) *corev1.Service {
	return marks.Mark(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      placeholder.HoldName(a.Name),
			Labels: map[string]string{
				names.LabelPlaceholder: names.PlaceholderHold,
				names.LabelAddress:     a.Name,
			},
			Annotations:     map[string]string{names.AnnotationClass: a.Spec.ClassName},
			OwnerReferences: []metav1.OwnerReference{placeholder.OwnerRef(a)},
		},
		Spec: placeholder.Spec(serviceFamily(ip)),
	}, marks.Requests{Pool: names.PoolName(a.Spec.ClassName), Pin: ip.String(), Sharing: key, Grant: a.Spec.ClassName})
}

func serviceFamily(ip netip.Addr) corev1.IPFamily {
	if ip.Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// grantState is the Granted condition: True when every holder the driver
// answers for (its placeholders, the Services the binding authorizes)
// carries the class's grant label, so a pool that admits only granted
// Services keeps their assignments. Holders without authority are not
// waited for (taking the address from them is the grant's point), nor a
// Service being released or let go, whose label a detach withdraws while
// MetalLB still shows it holding the address.
func grantState(a *iadv1alpha1.IPAddress, holders []corev1.Service, placeholderNamespace string) heldState {
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
	if len(missing) == 0 {
		return heldState{metav1.ConditionTrue, conditions.ReasonHoldersGranted,
			fmt.Sprintf("every Service holding the address for the driver carries %s", marks.GrantText(a.Spec.ClassName))}
	}
	slices.Sort(missing)
	return heldState{metav1.ConditionFalse, conditions.ReasonHolderNotGranted,
		fmt.Sprintf("Service %s holds the address without %s yet; the driver labels it", strings.Join(missing, ", "), marks.GrantText(a.Spec.ClassName))}
}
