package hold

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
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
	// key is the address's sharing key (sharingkey.Keys.Of); before its key
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
			granted: m.Granted(v.addr.Spec.ClassName), parked: m.Parked(v.park.Pool), own: marks.OneOf(s, v.placeholders)}
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
