package ipaddress

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// Event reasons the IPAddress controller records. They are stable: people
// and alerts match on them.
const (
	// ReasonHoldCreated (Normal, on the IPAddress): a hold placeholder was
	// created to keep the unattached address reserved in MetalLB.
	ReasonHoldCreated = "HoldCreated"
	// ReasonHoldReleased (Normal, on the IPAddress): the placeholders were
	// deleted because the address is attached to a workload.
	ReasonHoldReleased = "HoldReleased"
	// ReasonPinRepaired (Normal, on the IPAddress): a placeholder's MetalLB
	// pin did not name the address and was corrected.
	ReasonPinRepaired = "PinRepaired"
	// ReasonAssociationCleared (Normal, on the IPAddress): status.associatedTo
	// named a Service that no longer exists and was cleared.
	ReasonAssociationCleared = "AssociationCleared"
	// ReasonAddressTakenElsewhere (Warning, on the IPAddress): another Service
	// holds the address in MetalLB, so the placeholder cannot.
	ReasonAddressTakenElsewhere = "AddressTakenElsewhere"
	// ReasonConflictResolved (Normal, on the IPAddress): no Service holds the
	// address without authority any more; the phase was handed back.
	ReasonConflictResolved = "ConflictResolved"
	// ReasonPinWithdrawn (Normal, on the Service): the address was deleted,
	// MetalLB took it back from the Service, and the pin the driver had
	// written on the Service was withdrawn: the Service is detached.
	ReasonPinWithdrawn = "PinWithdrawn"
	// ReasonReleasing (Normal, on the Service): the address is being
	// deleted while the Service holds it; the driver's pin is set to a
	// release pin until MetalLB takes the address back. The same reason as
	// the Service controller's when it detaches.
	ReasonReleasing = "Releasing"
	// ReasonInvalidAddress (Warning, on the IPAddress): spec.address is not an
	// IP, so nothing can hold it.
	ReasonInvalidAddress = "InvalidAddress"
	// ReasonAddressLost (Warning, on the IPAddress, its claim and the Service
	// it is attached to): MetalLB's configuration no longer contains the
	// address, so MetalLB took it away; the phase is Lost.
	ReasonAddressLost = "AddressLost"
	// ReasonAddressRecovered (Normal, on the same objects): the class's pool
	// contains the address again; the phase is handed back and the address
	// is held (or attached) again with the same IP.
	ReasonAddressRecovered = "AddressRecovered"
)

// lostCause says why MetalLB's configuration does not contain the address
// ip of an address of class className: the class's pool is missing (pool
// nil or deleting; its class too, or not), or the pool's addresses do not
// cover ip. A class that is gone is no cause by itself: the class
// controller keeps its pool for the addresses recorded under its name. It returns the Lost
// condition's reason and message, or "" when the pool contains ip.
func lostCause(className string, class *iadv1alpha1.IPAddressClass, pool *metallbv1beta1.IPAddressPool, metallbNamespace string, ip netip.Addr) (reason, message string) {
	poolName := names.PoolName(className)
	switch {
	case (pool == nil || pool.DeletionTimestamp != nil) && (class == nil || class.DeletionTimestamp != nil):
		return conditions.ReasonClassDeleted, fmt.Sprintf("IPAddressClass %s was deleted and IPAddressPool %s/%s does not exist: MetalLB no longer has %s "+
			"and took it from whoever held it. The address comes back with the same IP when a class of that name serves a range containing it again",
			className, metallbNamespace, poolName, ip)
	case pool == nil || pool.DeletionTimestamp != nil:
		return conditions.ReasonPoolMissing, fmt.Sprintf("IPAddressPool %s/%s does not exist: MetalLB no longer has %s and took it from whoever held it. "+
			"The address comes back with the same IP when the pool is rendered again", metallbNamespace, poolName, ip)
	case !poolContains(pool.Spec.Addresses, ip):
		return conditions.ReasonOutsidePool, fmt.Sprintf("IPAddressPool %s/%s (%s) does not contain %s: MetalLB took it from whoever held it. "+
			"The address comes back with the same IP when the pool contains it again", metallbNamespace, poolName,
			strings.Join(pool.Spec.Addresses, ", "), ip)
	}
	return "", ""
}

// msgClassGone explains why an address of a deleted class is still held.
func msgClassGone(a *iadv1alpha1.IPAddress, metallbNamespace string, pool *metallbv1beta1.IPAddressPool) string {
	return fmt.Sprintf("IPAddressClass %s was deleted; IPAddressPool %s/%s is kept for the addresses still recorded under that name, "+
		"so this address stays reserved (and attached, if it is) until it is released; no new claim gets an address of the class",
		a.Spec.ClassName, metallbNamespace, pool.Name)
}

// poolContains reports whether one of a MetalLB pool's address entries
// (CIDRs, or ranges "first-last") contains ip. Entries that do not parse
// contain nothing.
func poolContains(entries []string, ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if first, last, ok := strings.Cut(e, "-"); ok {
			lo, err1 := netip.ParseAddr(strings.TrimSpace(first))
			hi, err2 := netip.ParseAddr(strings.TrimSpace(last))
			if err1 == nil && err2 == nil && lo.Unmap().Compare(ip) <= 0 && ip.Compare(hi.Unmap()) <= 0 &&
				lo.Unmap().Is4() == ip.Is4() {
				return true
			}
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil && p.Masked().Contains(ip) {
			return true
		}
	}
	return false
}

// served reports whether the controller serves an address: its class names
// this driver, or its class is gone and the address still carries the
// driver's finalizer (it was ours, and its teardown is still ours to do).
// class is nil when the class does not exist.
func served(a *iadv1alpha1.IPAddress, class *iadv1alpha1.IPAddressClass) bool {
	return binding.Served(a, class)
}

// serviceFamily is the Kubernetes IP family of an address.
func serviceFamily(ip netip.Addr) corev1.IPFamily {
	if ip.Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// renderHold is the hold placeholder of an address: a selectorless,
// single-stack LoadBalancer Service without node ports in the placeholder
// namespace, drawing from the class pool and pinned to exactly the address,
// carrying the sharing key key when it is not empty (holdKey), labelled
// with the address name and owner-referenced to it.
func renderHold(namespace string, a *iadv1alpha1.IPAddress, ip netip.Addr, key string) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      names.HoldPlaceholderName(a.Name),
			Labels: map[string]string{
				names.LabelPlaceholder: names.PlaceholderHold,
				names.LabelAddress:     a.Name,
				names.LabelGrant:       a.Spec.ClassName,
			},
			Annotations: map[string]string{
				names.MetalLBAddressPool:     names.PoolName(a.Spec.ClassName),
				names.MetalLBLoadBalancerIPs: ip.String(),
				names.AnnotationClass:        a.Spec.ClassName,
			},
			OwnerReferences: []metav1.OwnerReference{placeholder.OwnerRef(a)},
		},
		Spec: placeholder.Spec(serviceFamily(ip)),
	}
	if key != "" {
		svc.Annotations[names.MetalLBAllowSharedIP] = key
	}
	return svc
}

// holdKey is the sharing key an address's hold placeholders carry: the
// binding's (binding.SharingKey) when a workload shares or is about to
// share the address with them (share), or when one of them carries it
// already (taking a key back costs MetalLB a full pass over every Service,
// as giving it does); none otherwise. MetalLB reprocesses every Service
// when a Service's first allocation carries a key, so a placeholder that
// no workload shares stays keyless: a claim then costs MetalLB one
// single-Service allocation, as a plain Service does. A key of another
// binding (an address rebound since) is taken away.
func holdKey(a *iadv1alpha1.IPAddress, live []*corev1.Service, share bool) string {
	key := binding.SharingKey(a)
	if share {
		return key
	}
	for _, s := range live {
		if keyedExactly(s, key) {
			return key
		}
	}
	return ""
}

// sharing reports whether a workload is about to share the unattached
// address with its hold: the Service the attach grant names is about to
// take the shared handoff (sharesSoon), or a Service holds the address
// while it hands it back in the shared handoff (handingBack: an
// attachment an older driver made, whose hold went).
func sharing(a *iadv1alpha1.IPAddress, attaching *corev1.Service, holders, placeholders []corev1.Service) bool {
	if sharesSoon(a, attaching) {
		return true
	}
	for i := range holders {
		if handingBack(a, &holders[i], placeholders) {
			return true
		}
	}
	return false
}

// sharesSoon reports whether svc, the Service the address's attach grant
// names (names.AnnotationAttaching) while the address is not attached
// yet, is about to take the shared handoff: it asks for the address's
// claim and nothing keeps it from sharing the address with the hold
// placeholder (binding.ServiceShareProblem, the Service controller's own
// test). The hold then needs the binding's key before the Service is
// pinned.
func sharesSoon(a *iadv1alpha1.IPAddress, svc *corev1.Service) bool {
	ref := a.Spec.ClaimRef
	if svc == nil || svc.DeletionTimestamp != nil || ref == nil || svc.Namespace != ref.Namespace ||
		strings.TrimSpace(svc.Annotations[iadv1alpha1.ServiceClaimAnnotation]) != ref.Name {
		return false
	}
	return binding.ServiceShareProblem(svc) == ""
}

// pinnedExactly reports whether a Service's MetalLB pin names exactly ip.
func pinnedExactly(svc *corev1.Service, ip string) bool {
	pins := names.SplitIPs(svc.Annotations[names.MetalLBLoadBalancerIPs])
	return len(pins) == 1 && pins[0] == ip
}

// keyedExactly reports whether a placeholder carries exactly the sharing
// key key (no key at all when key is empty), and not the legacy spelling
// of the annotation (MetalLB reads the legacy one only when the current
// one is absent, so a stray legacy key is harmless but a person would be
// misled by it).
func keyedExactly(svc *corev1.Service, key string) bool {
	got, ok := svc.Annotations[names.MetalLBAllowSharedIP]
	_, legacy := svc.Annotations[names.MetalLBLegacyAllowSharedIP]
	if key == "" {
		return !ok && !legacy
	}
	return ok && got == key && !legacy
}

// repairedAnnotations is what a placeholder's annotations become once
// repaired: pinned to exactly ip, carrying exactly the sharing key (none
// when key is empty), and without the legacy spelling of the key. The
// input is not modified.
func repairedAnnotations(in map[string]string, ip, key string) map[string]string {
	out := make(map[string]string, len(in)+2)
	for k, v := range in {
		out[k] = v
	}
	out[names.MetalLBLoadBalancerIPs] = ip
	if key != "" {
		out[names.MetalLBAllowSharedIP] = key
	} else {
		delete(out, names.MetalLBAllowSharedIP)
	}
	delete(out, names.MetalLBLegacyAllowSharedIP)
	return out
}

// grantState is the Granted condition of an address whose holders (the
// Services MetalLB assigned its IP to) are given: True when every holder
// the driver answers for (its placeholders in the placeholder namespace,
// and the Services the binding authorizes) carries the grant label of the
// address's class, so MetalLB keeps their assignments when the class pool
// admits only granted Services. Holders without authority are not waited
// for: taking the address from them is the point of the grant. Nor is a
// Service the driver is releasing (binding.Releasing) or has let go
// (binding.LetGo): a detach withdraws its grant label on purpose, while
// MetalLB still shows it holding the address for a moment.
func grantState(a *iadv1alpha1.IPAddress, holders []corev1.Service, placeholderNamespace string) heldState {
	var missing []string
	for i := range holders {
		s := &holders[i]
		if s.DeletionTimestamp != nil || (s.Namespace != placeholderNamespace && (!authorized(a, s) || binding.Releasing(s) || binding.LetGo(a, s))) {
			continue
		}
		if !names.Granted(s.Labels, a.Spec.ClassName) {
			missing = append(missing, s.Namespace+"/"+s.Name)
		}
	}
	if len(missing) == 0 {
		return heldState{metav1.ConditionTrue, conditions.ReasonHoldersGranted,
			fmt.Sprintf("every Service holding the address for the driver carries %s=%s", names.LabelGrant, a.Spec.ClassName)}
	}
	slices.Sort(missing)
	return heldState{metav1.ConditionFalse, conditions.ReasonHolderNotGranted,
		fmt.Sprintf("Service %s holds the address without %s=%s yet; the driver labels it", strings.Join(missing, ", "), names.LabelGrant, a.Spec.ClassName)}
}

// authorized reports whether a Service may hold the address; the rule is
// shared with the Service controller's conflict detection.
func authorized(a *iadv1alpha1.IPAddress, svc *corev1.Service) bool {
	return binding.Authorizes(a, svc)
}

// unauthorizedHolders lists the Services among holders (the Services MetalLB
// assigned the address to) that hold it without the binding's authority.
// The driver's own placeholders are exempt (binding.Exempt, the rule the
// Service controller's conflict detection follows too).
func unauthorizedHolders(a *iadv1alpha1.IPAddress, holders []corev1.Service, placeholderNamespace string) []*corev1.Service {
	var out []*corev1.Service
	for i := range holders {
		s := &holders[i]
		if binding.Exempt(s, placeholderNamespace) || authorized(a, s) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// claimBinding is what the controller found about the claim an address's
// claimRef names, for the Conflict hand-back.
type claimBinding int

const (
	// bindingNone: the address has no claimRef.
	bindingNone claimBinding = iota
	// bindingStands: the claim exists with the claimRef's uid (or the uid is
	// not filled in yet).
	bindingStands
	// bindingBroken: the claim is gone or has another uid.
	bindingBroken
)

// handBackPhase is the phase a Conflict address returns to once nobody holds
// it wrongfully: Bound while the binding stands, Available otherwise. A
// broken binding also goes to Available, and the core, which never binds an
// address with a claimRef, then applies the address's reclaim policy.
func handBackPhase(b claimBinding) iadv1alpha1.IPAddressPhase {
	if b == bindingStands {
		return iadv1alpha1.AddressBound
	}
	return iadv1alpha1.AddressAvailable
}

// heldState is a value of the Held condition.
type heldState struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// holdPlan is what the holding invariant asks for in one pass.
type holdPlan struct {
	// Create: no placeholder exists; create the hold placeholder.
	Create bool
	// Repair lists placeholders whose pin does not name exactly the
	// address, or whose sharing key is not Key.
	Repair []*corev1.Service
	// Key is the sharing key the placeholders carry, created or repaired
	// (holdKey); "" for none.
	Key string
	// Delete lists placeholders to delete: all of them while the address is
	// associated, the surplus ones that do not hold it otherwise.
	Delete []*corev1.Service
	// Held is the condition to report; nil leaves it as it is.
	Held *heldState
	// TakenBy is the Service that holds the address without authority while
	// the placeholder cannot get it.
	TakenBy *corev1.Service
}

// planHold decides, for an address whose IP is ip, what the holding
// invariant asks for. placeholders are the Services of the placeholder
// namespace labelled with the address name; holders are every Service
// MetalLB assigned ip to; attached is the Service status.associatedTo
// names, nil when there is none or the cache does not show it; attaching
// is the Service the attach grant names, nil when there is none. An
// address is associated when status.associatedTo is set (a stale
// association is cleared before this).
//
// The invariant: a hold placeholder pinned to the address exists exactly
// while the address exists and is not attached to a workload that cannot
// share it. In a shared attachment (binding.SharesHold) the placeholder
// stays, holding the address beside the Service, and one is created if
// none is left once the Service holds the address; for any other
// attachment (the gap handoff) the placeholders are deleted. While the
// attached Service is being deleted, or has been let go in one write
// (binding.LetGo) and MetalLB is taking the address back, nothing is
// created or deleted: its association is cleared next. The placeholders
// carry the binding's sharing key only where a workload shares the address
// with them, or is about to (holdKey).
func planHold(a *iadv1alpha1.IPAddress, ip, placeholderNamespace string, placeholders, holders []corev1.Service, attached, attaching *corev1.Service) holdPlan {
	var p holdPlan
	var live []*corev1.Service
	for i := range placeholders {
		if placeholders[i].DeletionTimestamp == nil {
			live = append(live, &placeholders[i])
		}
	}

	if len(placeholders) == 0 {
		// The claim controller creates the IPAddress before it hands its
		// allocation placeholder over: the address is held meanwhile, and
		// neither a hold nor a release is due.
		if ph := recordingPlaceholder(a, ip, placeholderNamespace, holders); ph != nil {
			if a.Status.AssociatedTo != nil {
				p.Held = &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB, msgBeingHandedOver(ip, ph)}
				return p
			}
			p.Held = &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder, msgHeld(ip, ph)}
			return p
		}
	}
	if w := a.Status.AssociatedTo; w != nil {
		switch {
		case attached != nil && (attached.DeletionTimestamp != nil || binding.LetGo(a, attached)):
			return planLeaving(a, ip, w, live, len(placeholders))
		case binding.SharesHold(a, attached):
			return planShared(a, ip, placeholderNamespace, w, attached, live, len(placeholders))
		}
		if len(placeholders) == 0 {
			p.Held = &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload, msgReleased(w)}
			return p
		}
		p.Delete = live
		return p
	}

	if len(placeholders) == 0 {
		if h := importingHolder(a, ip, placeholderNamespace, holders); h != nil {
			p.Held = &heldState{metav1.ConditionUnknown, conditions.ReasonImporting, msgImporting(ip, h)}
			return p
		}
		p.Create, p.Key = true, holdKey(a, nil, sharing(a, attaching, holders, placeholders))
		p.Held = &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
			msgWaiting(ip, placeholderNamespace, names.HoldPlaceholderName(a.Name))}
		return p
	}
	if len(live) == 0 {
		p.Held = &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB, msgPlaceholderGoing(ip)}
		return p
	}

	p.Key = holdKey(a, live, sharing(a, attaching, holders, placeholders))
	repair, holder := repairsAndHolder(a, ip, p.Key, live)
	p.Repair = append(p.Repair, repair...)
	if holder != nil {
		for _, s := range live {
			if s != holder && !binding.Holds(s, ip) {
				p.Delete = append(p.Delete, s)
			}
		}
		p.Held = &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder, msgHeld(ip, holder)}
		return p
	}

	ours := map[string]bool{}
	for i := range placeholders {
		ours[placeholders[i].Namespace+"/"+placeholders[i].Name] = true
	}
	var waitingFor, otherPlaceholder *corev1.Service
	for i := range holders {
		s := &holders[i]
		if ours[s.Namespace+"/"+s.Name] {
			continue
		}
		if s.Namespace == placeholderNamespace {
			// Another claim's allocation placeholder got the address while
			// it was unheld; its claim controller gives it back.
			if otherPlaceholder == nil {
				otherPlaceholder = s
			}
			continue
		}
		if !authorized(a, s) {
			p.TakenBy = s
			p.Held = &heldState{metav1.ConditionFalse, conditions.ReasonTakenElsewhere, msgTakenElsewhere(ip, s)}
			return p
		}
		if waitingFor == nil {
			waitingFor = s
		}
	}
	if waitingFor != nil {
		msg := msgWaitingForRelease(ip, waitingFor)
		if keyedExactly(waitingFor, binding.SharingKey(a)) {
			msg = msgWaitingToShare(ip, live[0], waitingFor)
		}
		p.Held = &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB, msg}
		return p
	}
	if otherPlaceholder != nil {
		p.Held = &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB, msgHeldByOtherPlaceholder(ip, otherPlaceholder)}
		return p
	}
	p.Held = &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB, msgWaiting(ip, live[0].Namespace, live[0].Name)}
	return p
}

// recordingPlaceholder returns the allocation placeholder of the claim a
// is bound to (by the claim's uid) that MetalLB assigned ip, not yet
// handed over to a (labelled with another address or none); nil when there
// is none.
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
		if l := s.Labels[names.LabelAddress]; (l == "" || l == a.Name) && binding.Holds(s, ip) {
			return s
		}
	}
	return nil
}

func msgBeingHandedOver(ip string, s *corev1.Service) string {
	return fmt.Sprintf("MetalLB assigned %s to the claim's allocation placeholder %s/%s, which is being handed over to this address", ip, s.Namespace, s.Name)
}

// planShared plans a shared attachment: the attached Service carries the
// address's sharing key and can share it with the hold placeholder, so
// the placeholder keeps holding the address for the whole attachment. A
// missing placeholder is created once the Service holds the address (it
// then shares it at once: same key, ports apart), placeholders are
// repaired as when unattached, and surplus ones that do not hold are
// deleted. total counts the placeholders, those being deleted included.
func planShared(a *iadv1alpha1.IPAddress, ip, placeholderNamespace string, w *iadv1alpha1.WorkloadReference, attached *corev1.Service, live []*corev1.Service, total int) holdPlan {
	p := holdPlan{Key: binding.SharingKey(a)}
	if total == 0 {
		if !binding.Holds(attached, ip) {
			// The Service takes the address first (a gap handoff finished
			// by a Service that became able to share on the way).
			p.Held = &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload, msgReleased(w)}
			return p
		}
		p.Create = true
		p.Held = &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
			msgWaitingToShareAttached(ip, placeholderNamespace, names.HoldPlaceholderName(a.Name), w)}
		return p
	}
	if len(live) == 0 {
		p.Held = &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB, msgPlaceholderGoing(ip)}
		return p
	}
	repair, holder := repairsAndHolder(a, ip, p.Key, live)
	p.Repair = append(p.Repair, repair...)
	if holder == nil {
		p.Held = &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB, msgWaitingToShareAttached(ip, live[0].Namespace, live[0].Name, w)}
		return p
	}
	for _, s := range live {
		if s != holder && !binding.Holds(s, ip) {
			p.Delete = append(p.Delete, s)
		}
	}
	p.Held = &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload, msgSharedWithWorkload(ip, holder, w)}
	return p
}

// planLeaving plans an address attached to a Service that is being
// deleted or that the Service controller let go (binding.LetGo): nothing
// is created or deleted (the association is cleared next, and a
// placeholder that shares the address keeps holding it through the
// Service's deletion or release); only the Held condition follows what
// holds the address. total counts the placeholders, those being deleted
// included.
func planLeaving(a *iadv1alpha1.IPAddress, ip string, w *iadv1alpha1.WorkloadReference, live []*corev1.Service, total int) holdPlan {
	var p holdPlan
	for _, s := range live {
		if binding.Holds(s, ip) {
			p.Held = &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload, msgSharedWithWorkload(ip, s, w)}
			return p
		}
	}
	if total == 0 {
		p.Held = &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload, msgReleased(w)}
	}
	return p
}

// ownPlaceholder reports whether a placeholder labelled with the address's
// name is the address's own, the only kind the controller repairs, counts
// as holding and deletes: a hold placeholder owner-referenced to the
// address, or an allocation placeholder of the claim the address is bound
// to (the claim controller between labelling it and handing it over). A
// placeholder of another claim that carries the label is left to its
// claim controller: adopting it would rewrite it back and forth.
func ownPlaceholder(a *iadv1alpha1.IPAddress, ph *corev1.Service) bool {
	switch ph.Labels[names.LabelPlaceholder] {
	case names.PlaceholderHold:
		return ownedBy(ph, a)
	case names.PlaceholderAllocation:
		ref := a.Spec.ClaimRef
		switch {
		case ref == nil:
			return false
		case ref.UID != "":
			return ph.Labels[names.LabelClaimUID] == ref.UID
		default:
			return ph.Annotations[names.AnnotationClaimNamespace] == ref.Namespace && ph.Annotations[names.AnnotationClaimName] == ref.Name
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

// withoutIP removes ip from a metallb.io/loadBalancerIPs value. It returns
// the remaining value ("" when nothing is left) and whether ip was there.
func withoutIP(pin, ip string) (string, bool) {
	var keep []string
	found := false
	for _, f := range strings.Split(pin, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if got, err := names.ParseAddress(f); err == nil && got.String() == ip {
			found = true
			continue
		}
		keep = append(keep, f)
	}
	return strings.Join(keep, ","), found
}

// withdrawPin computes the annotations of a Service once the driver
// withdraws ip from the pin it wrote: the IP leaves metallb.io/loadBalancerIPs,
// and when no IP is left the pin and the authorship marker both go, and so
// do the sharing key and its marker if the driver wrote the key. Pins
// without the marker are hand-written and never touched: ok is false then,
// and also when the pin does not name ip.
func withdrawPin(annotations map[string]string, ip string) (out map[string]string, ok bool) {
	if _, marked := annotations[names.AnnotationPinnedBy]; !marked {
		return nil, false
	}
	rest, found := withoutIP(annotations[names.MetalLBLoadBalancerIPs], ip)
	if !found {
		return nil, false
	}
	out = make(map[string]string, len(annotations))
	for k, v := range annotations {
		out[k] = v
	}
	if rest == "" {
		delete(out, names.MetalLBLoadBalancerIPs)
		delete(out, names.AnnotationPinnedBy)
		if _, shared := out[names.AnnotationSharedBy]; shared {
			delete(out, names.MetalLBAllowSharedIP)
			delete(out, names.AnnotationSharedBy)
		}
	} else {
		out[names.MetalLBLoadBalancerIPs] = rest
	}
	return out, true
}

// releaseAction is what the teardown does next to a Service in the release
// sequence (releaseStep).
type releaseAction int

const (
	// releaseNone: nothing to do (not the driver's pin for the address, or
	// the Service is being deleted).
	releaseNone releaseAction = iota
	// releasePin: write the release pin and withdraw the driver's key.
	releasePin
	// releaseWait: wait for MetalLB to take the address back.
	releaseWait
	// releaseWithdraw: withdraw the release pin and the markers.
	releaseWithdraw
	// releaseDropIP: remove the IP from a pin the Service does not hold yet.
	releaseDropIP
)

// releaseStep decides the teardown's next step for one Service and the
// annotations to write for it (see releaseServices). Only a Service whose
// pin the driver wrote (pinned-by marker) and which the address's binding
// authorizes or whose pin names the IP is the teardown's to release. A
// Service the Service controller let go in one write (binding.LetGo) has
// nothing left to write: the teardown waits while it still holds the IP.
func releaseStep(svc *corev1.Service, a *iadv1alpha1.IPAddress, ip string) (releaseAction, map[string]string) {
	if binding.LetGo(a, svc) && binding.Holds(svc, ip) {
		return releaseWait, nil
	}
	if _, ours := svc.Annotations[names.AnnotationPinnedBy]; !ours || svc.DeletionTimestamp != nil {
		return releaseNone, nil
	}
	pin := svc.Annotations[names.MetalLBLoadBalancerIPs]
	_, pinned := withoutIP(pin, ip)
	if !pinned && !binding.Authorizes(a, svc) {
		return releaseNone, nil
	}
	ingress := binding.IngressIPs(svc)
	holds, anyIngress := slices.Contains(ingress, ip), len(ingress) > 0
	release := binding.ReleasePinValue(svc)
	switch {
	case holds && pin != release:
		return releasePin, binding.ReleaseAnnotations(svc.Annotations, release)
	case holds:
		return releaseWait, nil
	case binding.IsReleasePin(pin) && anyIngress:
		return releaseWait, nil // MetalLB drops every address at once; not yet
	case binding.IsReleasePin(pin):
		return releaseWithdraw, binding.WithdrawnAnnotations(svc.Annotations)
	case pinned:
		ann, _ := withdrawPin(svc.Annotations, ip)
		return releaseDropIP, ann
	}
	return releaseNone, nil
}

// Address states, the values of the "state" label of metallb_iad_addresses.
const (
	stateHeld       = "held"
	stateAssociated = "associated"
	stateConflict   = "conflict"
	stateWaiting    = "waiting"
)

// addressState classifies an address for the metallb_iad_addresses gauge:
// conflict (phase Conflict, or another Service holds it), associated
// (attached to a workload), held (a placeholder holds it) or waiting.
func addressState(a *iadv1alpha1.IPAddress) string {
	if a.Status.Phase == iadv1alpha1.AddressConflict {
		return stateConflict
	}
	if a.Status.AssociatedTo != nil {
		return stateAssociated
	}
	for _, c := range a.Status.Conditions {
		if c.Type != conditions.Held {
			continue
		}
		switch {
		case c.Status == metav1.ConditionTrue:
			return stateHeld
		case c.Reason == conditions.ReasonTakenElsewhere:
			return stateConflict
		}
	}
	return stateWaiting
}

// Messages, one function each so their text is tested.

func workloadName(w *iadv1alpha1.WorkloadReference) string {
	return fmt.Sprintf("%s %s/%s", w.Kind, w.Namespace, w.Name)
}

func msgReleased(w *iadv1alpha1.WorkloadReference) string {
	return fmt.Sprintf("No placeholder holds the address: it is released for %s", workloadName(w))
}

func msgWaiting(ip, namespace, name string) string {
	return fmt.Sprintf("Waiting for MetalLB to assign %s to placeholder Service %s/%s", ip, namespace, name)
}

func msgPlaceholderGoing(ip string) string {
	return fmt.Sprintf("The placeholder of %s is being deleted; a new one is created once it is gone", ip)
}

func msgHeld(ip string, s *corev1.Service) string {
	return fmt.Sprintf("MetalLB assigned %s to placeholder Service %s/%s", ip, s.Namespace, s.Name)
}

func msgTakenElsewhere(ip string, s *corev1.Service) string {
	return fmt.Sprintf("Service %s/%s holds %s in MetalLB without this address's authority, so the placeholder cannot; "+
		"the driver keeps the placeholder pinned to %s and never substitutes another address", s.Namespace, s.Name, ip, ip)
}

func msgWaitingForRelease(ip string, s *corev1.Service) string {
	return fmt.Sprintf("Waiting for Service %s/%s, which this address's binding authorizes, to release %s to the placeholder",
		s.Namespace, s.Name, ip)
}

func msgWaitingToShare(ip string, ph, s *corev1.Service) string {
	return fmt.Sprintf("Waiting for MetalLB to let placeholder Service %s/%s share %s with Service %s/%s, which this address's binding authorizes (shared handoff)",
		ph.Namespace, ph.Name, ip, s.Namespace, s.Name)
}

func msgHeldByOtherPlaceholder(ip string, s *corev1.Service) string {
	return fmt.Sprintf("Placeholder Service %s/%s of another claim got %s while it was unheld; waiting for the claim controller to give it back",
		s.Namespace, s.Name, ip)
}

func msgSharedWithWorkload(ip string, s *corev1.Service, w *iadv1alpha1.WorkloadReference) string {
	return fmt.Sprintf("MetalLB assigned %s to placeholder Service %s/%s, which shares it with %s, the address is attached to (shared attachment): "+
		"detaching or deleting that Service leaves the address held", ip, s.Namespace, s.Name, workloadName(w))
}

func msgWaitingToShareAttached(ip, namespace, name string, w *iadv1alpha1.WorkloadReference) string {
	return fmt.Sprintf("Waiting for MetalLB to let placeholder Service %s/%s share %s with %s, the address is attached to (shared attachment)",
		namespace, name, ip, workloadName(w))
}

func msgHoldCreated(ip, namespace, name string) string {
	return fmt.Sprintf("Created placeholder Service %s/%s pinned to %s to hold the address while it is not attached", namespace, name, ip)
}

func msgHoldReleased(w *iadv1alpha1.WorkloadReference, n int) string {
	return fmt.Sprintf("Deleted %d placeholder Service(s) to release the address for %s", n, workloadName(w))
}

func msgPinRepaired(s *corev1.Service, ip string) string {
	return fmt.Sprintf("Placeholder Service %s/%s was pinned to %q; re-pinned it to %s", s.Namespace, s.Name,
		s.Annotations[names.MetalLBLoadBalancerIPs], ip)
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

// byClaim names the claim an address was bound to, for messages.
func byClaim(a *iadv1alpha1.IPAddress) string {
	if ref := a.Spec.ClaimRef; ref != nil && ref.Name != "" {
		return fmt.Sprintf(" (claim %s/%s)", ref.Namespace, ref.Name)
	}
	return ""
}

func msgInvalidAddress(address string, err error) string {
	return fmt.Sprintf("spec.address %q is not an IP address (%v); nothing can hold it", address, err)
}

// grantedLabels is a placeholder's labels with the class's grant label.
// The input is not modified.
func grantedLabels(in map[string]string, class string) map[string]string {
	out := make(map[string]string, len(in)+1)
	for k, v := range in {
		out[k] = v
	}
	out[names.LabelGrant] = class
	return out
}

func msgAddressLostOn(a *iadv1alpha1.IPAddress, message string) string {
	return fmt.Sprintf("IPAddress %s (%s) is Lost: %s", a.Name, a.Spec.Address, message)
}

func msgAddressRecovered(a *iadv1alpha1.IPAddress, metallbNamespace string, phase iadv1alpha1.IPAddressPhase) string {
	return fmt.Sprintf("IPAddressPool %s/%s contains %s again: IPAddress %s is %s again and keeps the same IP",
		metallbNamespace, names.PoolName(a.Spec.ClassName), a.Spec.Address, a.Name, phase)
}

// repairsAndHolder returns, among an address's live placeholders, those
// whose pin or grant label is not the address's or whose sharing key is
// not key (to repair), and the first that holds ip in MetalLB's books (nil
// if none).
func repairsAndHolder(a *iadv1alpha1.IPAddress, ip, key string, live []*corev1.Service) (repair []*corev1.Service, holder *corev1.Service) {
	for _, s := range live {
		if !pinnedExactly(s, ip) || !keyedExactly(s, key) || !names.Granted(s.Labels, a.Spec.ClassName) {
			repair = append(repair, s)
		}
		if holder == nil && binding.Holds(s, ip) {
			holder = s
		}
	}
	return repair, holder
}
