package ipaddress

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// The hold (docs/design.md §3): observe (hold.go), planHold here, confirm
// with the API server what the plan asks (holdPlan.Confirm), apply. The
// plan is pure and speaks in reason codes; events.go puts them in words.

// holdView is what the hold is planned on: the address, its IP and
// sharing keys, and the Services around it as the cache shows them (or,
// where the plan asked, the API server).
type holdView struct {
	addr *iadv1alpha1.IPAddress
	ip   string
	// key is the address's sharing key (marks.Keys.Of); before its key
	// under the secret held before a rotation, "" when none.
	key, before          string
	placeholderNamespace string
	park                 parkOpt
	// cached are the address's own placeholders as the cache shows them;
	// placeholders the plan's: the API server's when it shows some the
	// cache missed.
	cached, placeholders []corev1.Service
	// holders are the Services MetalLB assigned the IP.
	holders []corev1.Service
	// attached is the Service associatedTo names (nil when the cache does
	// not show it), attaching the one the attach grant names.
	attached, attaching *corev1.Service
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

// confirmation is a read the plan asks of the API server before it is
// applied, where the cache may not show what the plan acts on.
type confirmation uint8

const (
	// confirmAttached: the plan drops an attached address's placeholders
	// for the gap handoff, but the cache may miss the key written before
	// the association (a shared attachment keeps its hold), or a detach
	// that cleared the association before the key.
	confirmAttached confirmation = 1 << iota
	// confirmPlaceholders: the plan creates a placeholder or newly reports
	// the hold released (the Service controller pins on that), and the
	// cache may miss a placeholder.
	confirmPlaceholders
	// confirmRecording: the plan creates a hold, and the claim's
	// allocation placeholder may hold the address unseen, about to be
	// handed over.
	confirmRecording
)

// holdPlan is what the holding invariant asks for in one pass.
type holdPlan struct {
	Create bool              // create the hold placeholder
	Repair []*corev1.Service // pin, grant label or key not the address's (a parked one comes back)
	Key    string            // the placeholders' sharing key (holdKey), "" for none
	Delete []*corev1.Service // for a workload that cannot share, or surplus
	Park   []*corev1.Service // to step aside to the parking pool for the attached workload
	// Held is the verdict to report; nil leaves the condition as it is.
	Held *heldVerdict
	// TakenBy holds the address without authority, so the hold cannot.
	TakenBy *corev1.Service
	// Parking: a parked placeholder still holds the address, until MetalLB
	// moves it to the parking pool.
	Parking bool
	// Ungranted are the holders the Granted condition waits for
	// (ungranted); none: Granted is True.
	Ungranted []string
	// Pair is the key the address is shared under (pairKey), which the
	// phases after the hold go by.
	Pair string
	// Confirm are the reads to make before the plan is applied.
	Confirm confirmation
}

// writes reports whether the plan creates, deletes or parks a placeholder.
func (p holdPlan) writes() bool { return p.Create || len(p.Delete) > 0 || len(p.Park) > 0 }

// seen is a Service as the hold plans on it, its marks and its standing
// toward the address read once (look).
type seen struct {
	*corev1.Service
	marks marks.Marks
	// holds: MetalLB assigned it the address; pinned: its pin names exactly
	// the address; granted: it carries the class's grant label; parked: it
	// asks for the parking pool and no address; own: it is one of the
	// address's placeholders.
	holds, pinned, granted, parked, own bool
}

// planning is one planHold: the view, its Services as seen, and the key
// the pair shares (pairKey).
type planning struct {
	*holdView
	key string
	// phs are the address's placeholders, live those not being deleted,
	// hs the Services holding the address.
	phs, live, hs []seen
}

// look reads the view's Services once for planHold.
func look(v *holdView) *planning {
	p := &planning{holdView: v, key: pairKey(v.addr, v.key, v.ip, v.attached, v.holders, v.placeholders)}
	see := func(s *corev1.Service) seen {
		m := marks.Of(s)
		return seen{Service: s, marks: m, holds: marks.Holds(s, v.ip), pinned: m.PinnedExactly(v.ip),
			granted: m.Granted(v.addr.Spec.ClassName), parked: m.Parked(v.park.Pool), own: isOneOf(s, v.placeholders)}
	}
	for i := range v.placeholders {
		p.phs = append(p.phs, see(&v.placeholders[i]))
		if v.placeholders[i].DeletionTimestamp == nil {
			p.live = append(p.live, p.phs[i])
		}
	}
	for i := range v.holders {
		p.hs = append(p.hs, see(&v.holders[i]))
	}
	return p
}

// planHold decides what the holding invariant asks for, and which of it
// the API server must confirm first.
func planHold(v *holdView) holdPlan {
	p := look(v)
	plan := p.decide()
	plan.Pair = p.key
	plan.Ungranted = ungranted(v.addr, v.holders, v.placeholderNamespace)
	if v.addr.Status.AssociatedTo != nil && len(plan.Delete)+len(plan.Park) > 0 && !marks.SharesHold(v.attached, p.key) {
		plan.Confirm |= confirmAttached
	}
	if plan.Create || (plan.Held != nil && plan.Held.Code.released() && !alreadyReleased(v.addr)) {
		plan.Confirm |= confirmPlaceholders
	}
	if plan.Create {
		plan.Confirm |= confirmRecording
	}
	return plan
}

// decide is planHold's decision.
func (p *planning) decide() holdPlan {
	if len(p.phs) == 0 {
		if ph := recordingPlaceholder(p.addr, p.ip, p.placeholderNamespace, p.holders); ph != nil {
			return p.planRecording(ph)
		}
	}
	if w := p.addr.Status.AssociatedTo; w != nil {
		return p.planAttached(w)
	}
	switch {
	case len(p.phs) == 0:
		return p.planMissing()
	case len(p.live) == 0:
		return holdPlan{Held: verdict(waitingPlaceholderGoing, nil)}
	}
	plan := holdPlan{Key: p.holdKey(p.sharing())}
	if p.anyParked() && p.heldByOthers() {
		// Pinned back now, the placeholder would find the address taken,
		// lose its parking address too and cost MetalLB a full pass.
		plan.Held, plan.TakenBy = p.unheld()
		return plan
	}
	var holder *corev1.Service
	if plan.Repair, holder = p.repairsAndHolder(plan.Key); holder != nil {
		plan.Delete = p.surplus(holder)
		plan.Held = verdict(heldByPlaceholder, holder)
		return plan
	}
	// A parked hold pinned back is reported Unknown at once, not left
	// False: Held False for a workload is what lets the next attach pin,
	// and the returning hold is about to take the address.
	plan.Held, plan.TakenBy = p.unheld()
	return plan
}

// planRecording plans an address whose claim's allocation placeholder holds
// it and is not handed over yet: the claim controller records the address
// first, so neither a hold nor a release is due.
func (p *planning) planRecording(ph *corev1.Service) holdPlan {
	if p.addr.Status.AssociatedTo != nil {
		return holdPlan{Held: verdict(waitingHandOver, ph)}
	}
	return holdPlan{Held: verdict(heldByPlaceholder, ph)}
}

// planAttached plans an attached address: nothing moves while its Service
// leaves, the hold stays in a shared attachment, and otherwise the
// placeholders park when the parking pool can take them (the parked
// handoff) or go (the gap handoff).
func (p *planning) planAttached(w *iadv1alpha1.WorkloadReference) holdPlan {
	attached := p.attached
	switch {
	case attached != nil && (attached.DeletionTimestamp != nil || marks.LetGo(p.addr, attached)):
		return p.planLeaving(w)
	case marks.SharesHold(attached, p.key):
		return p.planShared(w)
	case len(p.phs) == 0:
		return holdPlan{Held: &heldVerdict{Code: heldReleased, For: w}}
	case p.park.Open:
		return p.planParking(w)
	}
	return holdPlan{Delete: services(p.live, func(seen) bool { return true })}
}

// planParking plans the gap handoff of an address whose placeholders step
// aside to the parking pool instead of going: MetalLB moves each to a
// parking address and frees it without a pass over every Service. The
// hold counts as released once no placeholder holds the address any more.
func (p *planning) planParking(w *iadv1alpha1.WorkloadReference) holdPlan {
	plan := holdPlan{Park: services(p.live, func(s seen) bool { return !s.parked })}
	// Held is left as it is while a placeholder still holds the address:
	// it does hold it until MetalLB moves it, so Held is written once,
	// False, when the address is free for the workload.
	switch {
	case len(plan.Park) > 0:
	case slices.ContainsFunc(p.phs, func(s seen) bool { return s.holds }):
		plan.Parking = true
	default:
		plan.Held = &heldVerdict{Code: heldReleasedParked, For: w}
	}
	return plan
}

// services are the Services of list that keep says to.
func services(list []seen, keep func(seen) bool) []*corev1.Service {
	var out []*corev1.Service
	for _, s := range list {
		if keep(s) {
			out = append(out, s.Service)
		}
	}
	return out
}

// anyParked reports whether a live placeholder is parked.
func (p *planning) anyParked() bool {
	return slices.ContainsFunc(p.live, func(s seen) bool { return s.parked })
}

// heldByOthers reports whether a Service other than the address's own
// placeholders holds it.
func (p *planning) heldByOthers() bool {
	return slices.ContainsFunc(p.hs, func(s seen) bool { return s.holds && !s.own })
}

// planMissing plans an unattached address without placeholders: a hold is
// created unless the address is being imported from the Service holding it.
func (p *planning) planMissing() holdPlan {
	if h := p.importingHolder(); h != nil {
		return holdPlan{Held: verdict(heldImporting, h)}
	}
	return holdPlan{Create: true, Key: p.holdKey(p.sharing()), Held: &heldVerdict{Code: waitingForHold, By: p.holdName()}}
}

// holdName is the name of the address's hold placeholder.
func (p *planning) holdName() types.NamespacedName {
	return types.NamespacedName{Namespace: p.placeholderNamespace, Name: placeholder.HoldName(p.addr.Name)}
}

// importingHolder returns the Service the unattached address is being
// imported from: in the claim's namespace, it holds the address and names
// the claim in both the claim annotation and the imported-into mark (the
// Service controller writes both before it creates the address, and
// associates it right after). Such an address gets no hold. nil otherwise.
func (p *planning) importingHolder() *corev1.Service {
	a := p.addr
	ref := a.Spec.ClaimRef
	if a.Status.AssociatedTo != nil || ref == nil || ref.Name == "" || a.Labels[marks.LabelImported] != "true" {
		return nil
	}
	for _, s := range p.hs {
		if s.Namespace != ref.Namespace || s.Namespace == p.placeholderNamespace || s.DeletionTimestamp != nil {
			continue
		}
		if marks.ImportedInto(s.Service) == ref.Name && s.marks.Claim == ref.Name && s.holds {
			return s.Service
		}
	}
	return nil
}

// surplus are the live placeholders besides holder that do not hold the
// address.
func (p *planning) surplus(holder *corev1.Service) []*corev1.Service {
	return services(p.live, func(s seen) bool { return s.Service != holder && !s.holds })
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

// isOneOf reports whether svc is one of svcs, by name.
func isOneOf(svc *corev1.Service, svcs []corev1.Service) bool {
	for i := range svcs {
		if svcs[i].Namespace == svc.Namespace && svcs[i].Name == svc.Name {
			return true
		}
	}
	return false
}

// ownPlaceholder reports whether a placeholder labelled with the address's
// name is its own, the only kind repaired, counted and deleted: a hold
// owner-referenced to it, or an allocation placeholder of its claim. Another
// claim's is left to that claim's controller, or both would rewrite it.
func ownPlaceholder(a *iadv1alpha1.IPAddress, ph *corev1.Service) bool {
	switch ph.Labels[marks.LabelPlaceholder] {
	case names.PlaceholderHold:
		return ownedBy(ph, a)
	case names.PlaceholderAllocation:
		ref := a.Spec.ClaimRef
		switch {
		case ref == nil:
			return false
		case ref.UID != "":
			return ph.Labels[marks.LabelClaimUID] == ref.UID
		default:
			return ph.Annotations[marks.AnnotationClaimNamespace] == ref.Namespace && ph.Annotations[marks.AnnotationClaimName] == ref.Name
		}
	}
	return false
}

// ownPlaceholders keeps the address's own placeholders of a list.
func ownPlaceholders(a *iadv1alpha1.IPAddress, phs []corev1.Service) []corev1.Service {
	out := phs[:0:0]
	for i := range phs {
		if ownPlaceholder(a, &phs[i]) {
			out = append(out, phs[i])
		}
	}
	return out
}

// ownedBy reports whether a Service carries an owner reference to the address.
func ownedBy(svc *corev1.Service, a *iadv1alpha1.IPAddress) bool {
	for _, o := range svc.OwnerReferences {
		if o.UID == a.UID {
			return true
		}
	}
	return false
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
			s.Labels[marks.LabelPlaceholder] != names.PlaceholderAllocation || s.Labels[marks.LabelClaimUID] != ref.UID {
			continue
		}
		if l := s.Labels[marks.LabelAddress]; (l == "" || l == a.Name) && marks.Holds(s, ip) {
			return s
		}
	}
	return nil
}

// planShared plans a shared attachment: the placeholder keeps holding the
// address beside the Service. A missing one is created once the Service
// holds the address (it then shares it at once: same key, ports apart).
func (p *planning) planShared(w *iadv1alpha1.WorkloadReference) holdPlan {
	plan := holdPlan{Key: p.key}
	switch {
	case len(p.phs) == 0 && !marks.Holds(p.attached, p.ip):
		// The Service takes the address first (a gap handoff finished by
		// a Service that became able to share on the way).
		plan.Held = &heldVerdict{Code: heldReleased, For: w}
	case len(p.phs) == 0:
		plan.Create = true
		plan.Held = &heldVerdict{Code: waitingToShareAttached, By: p.holdName(), For: w}
	case len(p.live) == 0:
		plan.Held = verdict(waitingPlaceholderGoing, nil)
	default:
		var holder *corev1.Service
		if plan.Repair, holder = p.repairsAndHolder(plan.Key); holder == nil {
			plan.Held = verdict(waitingToShareAttached, p.live[0].Service)
		} else {
			plan.Delete = p.surplus(holder)
			plan.Held = verdict(heldBeside, holder)
		}
		plan.Held.For = w
	}
	return plan
}

// planLeaving plans an address whose attached Service is being deleted or
// was let go (marks.LetGo): nothing is created or deleted, since the
// association is cleared next; only Held follows what holds the address.
func (p *planning) planLeaving(w *iadv1alpha1.WorkloadReference) holdPlan {
	if i := slices.IndexFunc(p.live, func(s seen) bool { return s.holds }); i >= 0 {
		h := verdict(heldBeside, p.live[i].Service)
		h.For = w
		return holdPlan{Held: h}
	}
	if len(p.phs) == 0 {
		return holdPlan{Held: &heldVerdict{Code: heldReleased, For: w}}
	}
	return holdPlan{}
}

// repairsAndHolder returns, among live placeholders, those to repair (pin,
// grant label or sharing key, key, not the address's) and the first that
// holds the address.
func (p *planning) repairsAndHolder(key string) (repair []*corev1.Service, holder *corev1.Service) {
	for _, s := range p.live {
		if !s.pinned || !s.marks.KeyedExactly(key) || !s.granted {
			repair = append(repair, s.Service)
		}
		if holder == nil && s.holds {
			holder = s.Service
		}
	}
	return repair, holder
}

// holdKey is the sharing key of the hold placeholders: the binding's when a
// workload shares or is about to share the address with them (share), or
// when one carries it already (taking a key back costs MetalLB a full pass
// over every Service, as giving it does); none otherwise, so an unshared
// claim costs MetalLB one single-Service allocation. The binding's key
// under the secret before a rotation is replaced by the new one in one
// write: stripped first, a workload attaching at once would have the hold
// written twice, and MetalLB, still on the first write, would refuse the
// workload its address. Any other key (another binding's, one written by
// hand) is taken away.
func (p *planning) holdKey(share bool) string {
	if share || slices.ContainsFunc(p.live, func(s seen) bool {
		return s.marks.KeyedExactly(p.key) || (p.before != "" && s.marks.KeyedExactly(p.before))
	}) {
		return p.key
	}
	return ""
}

// sharing reports whether a workload is about to share the unattached
// address with its hold: the Service being attached takes the shared
// handoff (sharesSoon; never while the hold can park), or a holder hands
// the address back in it.
func (p *planning) sharing() bool {
	if !p.park.Open && sharesSoon(p.addr, p.attaching) {
		return true
	}
	return slices.ContainsFunc(p.hs, func(s seen) bool { return handingBack(p.addr, p.key, s.Service, p.placeholders) })
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

// handingBack reports whether svc, holding the unattached address, hands
// it back in the shared handoff: not a placeholder of it, carrying exactly
// its sharing key, and authorized by its binding.
func handingBack(a *iadv1alpha1.IPAddress, key string, svc *corev1.Service, placeholders []corev1.Service) bool {
	if a.Status.AssociatedTo != nil || isOneOf(svc, placeholders) {
		return false
	}
	return marks.Of(svc).KeyedExactly(key) && marks.Authorizes(a, svc)
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
	case p.Held.Code == heldImporting:
		return "the Service controller to import the address"
	case p.Held.Code.waits():
		return "the hold to settle (the Held condition says on what)"
	}
	return ""
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

// renderHold is the hold placeholder of an address: pinned to exactly ip,
// drawing from the class pool, with the sharing key when key is not empty,
// labelled with the address name and owner-referenced to it.
func renderHold(namespace string, a *iadv1alpha1.IPAddress, ip netip.Addr, key string) *corev1.Service {
	return marks.Mark(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      placeholder.HoldName(a.Name),
			Labels: map[string]string{
				marks.LabelPlaceholder: names.PlaceholderHold,
				marks.LabelAddress:     a.Name,
			},
			Annotations:     map[string]string{marks.KeyClass: a.Spec.ClassName},
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

// rightfulHolder is the workload that should hold the address beside its
// placeholders: the attached Service or, while a shared handoff attaches
// the address, the Service being attached (MetalLB may refuse it for an
// allocation kept from a former holder with the same key and port).
func rightfulHolder(v *holdView, key string) *corev1.Service {
	if v.addr.Status.AssociatedTo == nil && marks.SharesHold(v.attaching, key) {
		return v.attaching
	}
	return v.attached
}
