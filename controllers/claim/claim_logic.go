package claim

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// Event reasons the claim controller records on claims. They are stable:
// people and alerts match on them.
const (
	// ReasonWaitingForMetalLB (Normal): a placeholder was created and MetalLB
	// has not assigned it an address yet.
	ReasonWaitingForMetalLB = "WaitingForMetalLB"
	// ReasonPoolExhausted (Warning): MetalLB reported it has no free address
	// of the family in the class pool.
	ReasonPoolExhausted = "PoolExhausted"
	// ReasonPoolNotReady (Warning): MetalLB does not know the class pool.
	ReasonPoolNotReady = "PoolNotReady"
	// ReasonClassNotServed (Warning): the claim carries this driver's
	// provisioner stamp, but its class is missing or names another provisioner.
	ReasonClassNotServed = "ClassNotServed"
	// ReasonRetargeted (Normal): the claim names another class than the
	// one its allocation placeholder was drawing from; that placeholder was
	// deleted.
	ReasonRetargeted = "Retargeted"
	// ReasonRecorded (Normal): an address was recorded as an IPAddress bound
	// to the claim.
	ReasonRecorded = "Recorded"
	// ReasonLedgerMismatch (Warning): the IPAddress name of the address
	// MetalLB assigned is taken by an entry for another address or binding.
	ReasonLedgerMismatch = "LedgerMismatch"
	// ReasonWaitingForName (Normal): the name of the family's allocation
	// placeholder is still taken by the hold placeholder of an address that
	// is not the claim's; the claim proceeds once it goes.
	ReasonWaitingForName = "WaitingForName"
	// ReasonLedgerAddressReturned (Normal): MetalLB assigned the claim's
	// placeholder an address the ledger already records (it was unheld for
	// a moment, during a handoff); the driver gave it back by deleting the
	// placeholder instead of recording it.
	ReasonLedgerAddressReturned = "LedgerAddressReturned"
	// ReasonWaitingForLedger (Normal): an address of the class is in the
	// ledger but not held in MetalLB right now, or MetalLB assigned an
	// address whose IPAddress is being deleted; the claim waits so that
	// MetalLB cannot hand it that address.
	ReasonWaitingForLedger = "WaitingForLedger"
)

// MetalLBAllocationFailed is the reason of the Warning Event MetalLB's
// controller records on a Service it could not give an address to.
const MetalLBAllocationFailed = "AllocationFailed"

// served reports whether the claim is this driver's to provision: stamped
// with our provisioner by the core, not being deleted, and not asking for a
// specific existing address (that is the core's matching path).
func served(c *iadv1alpha1.IPAddressClaim) bool {
	return c.Annotations[iadv1alpha1.ProvisionerAnnotation] == names.Provisioner &&
		c.DeletionTimestamp == nil &&
		c.Spec.AddressName == ""
}

// className is the claim's class in the core's order: spec.className, else
// the sticky status.className (the default class the core resolved). Empty
// means the core has not resolved it yet; the driver never resolves
// defaults itself.
func className(c *iadv1alpha1.IPAddressClaim) string {
	if c.Spec.ClassName != "" {
		return c.Spec.ClassName
	}
	return c.Status.ClassName
}

// retargeted reports whether ph is an allocation placeholder still drawing
// (not handed over to an address) for another class than class, the one
// the claim names now: it was created before the claim was retargeted, and
// what it draws would be recorded under a class the claim no longer names.
func retargeted(ph *corev1.Service, class string) bool {
	return ph != nil && ph.Labels[names.LabelPlaceholder] == names.PlaceholderAllocation &&
		ph.Labels[names.LabelAddress] == "" && ph.DeletionTimestamp == nil &&
		ph.Annotations[names.AnnotationClass] != "" && ph.Annotations[names.AnnotationClass] != class
}

// classProblem explains why a class cannot serve a claim of this driver, or
// returns "" when it can. class is nil when it does not exist.
func classProblem(name string, class *iadv1alpha1.IPAddressClass) string {
	if class == nil {
		return fmt.Sprintf("IPAddressClass %q does not exist; the claim waits until it is created", name)
	}
	if class.Spec.Provisioner != names.Provisioner {
		return fmt.Sprintf("IPAddressClass %q is served by provisioner %q, not by %s; this driver does not provision it",
			name, class.Spec.Provisioner, names.Provisioner)
	}
	return ""
}

// reclaimPolicy is the policy copied onto a new address: the class's, Retain
// when the class leaves it empty.
func reclaimPolicy(class *iadv1alpha1.IPAddressClass) iadv1alpha1.ReclaimPolicy {
	if class.Spec.ReclaimPolicy == "" {
		return iadv1alpha1.ReclaimRetain
	}
	return class.Spec.ReclaimPolicy
}

// bindsClaim reports whether an address's claimRef names the claim: same
// namespace and name, uid empty (not yet accepted by the core) or equal.
func bindsClaim(a *iadv1alpha1.IPAddress, namespace, name string, uid types.UID) bool {
	r := a.Spec.ClaimRef
	return r != nil && r.Namespace == namespace && r.Name == name && (r.UID == "" || r.UID == string(uid))
}

// addressFamily is the family of an IP in text form, "" when it does not parse.
func addressFamily(s string) iadv1alpha1.IPFamily {
	ip, err := names.ParseAddress(s)
	switch {
	case err != nil:
		return ""
	case ip.Is4():
		return iadv1alpha1.FamilyIPv4
	default:
		return iadv1alpha1.FamilyIPv6
	}
}

// boundByFamily groups the addresses bound to the claim by family.
// Addresses whose claimRef names the claim with another uid are stale
// bindings and do not count.
func boundByFamily(c *iadv1alpha1.IPAddressClaim, addrs []iadv1alpha1.IPAddress) map[iadv1alpha1.IPFamily][]*iadv1alpha1.IPAddress {
	out := map[iadv1alpha1.IPFamily][]*iadv1alpha1.IPAddress{}
	for i := range addrs {
		a := &addrs[i]
		if !bindsClaim(a, c.Namespace, c.Name, c.UID) {
			continue
		}
		if f := addressFamily(a.Spec.Address); f != "" {
			out[f] = append(out[f], a)
		}
	}
	return out
}

// missingFamilies lists, in the claim's order (IPv4 first), the families of
// the claim no bound address covers yet.
func missingFamilies(c *iadv1alpha1.IPAddressClaim, bound map[iadv1alpha1.IPFamily][]*iadv1alpha1.IPAddress) []iadv1alpha1.IPFamily {
	var out []iadv1alpha1.IPFamily
	for _, f := range c.Spec.Family.Families() {
		if len(bound[f]) == 0 {
			out = append(out, f)
		}
	}
	return out
}

// serviceFamily is the Kubernetes IP family of an address family.
func serviceFamily(f iadv1alpha1.IPFamily) corev1.IPFamily {
	if f == iadv1alpha1.FamilyIPv6 {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// renderPlaceholder is the allocation placeholder that draws the claim's
// address of one family from the class pool: selectorless, LoadBalancer,
// no node ports, single-stack, one inert port, named from the claim uid and
// the family, and carrying the claim's identity.
func renderPlaceholder(namespace string, c *iadv1alpha1.IPAddressClaim, class string, f iadv1alpha1.IPFamily) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      names.AllocationPlaceholderName(c.UID, string(f)),
			Labels: map[string]string{
				names.LabelPlaceholder: names.PlaceholderAllocation,
				names.LabelClaimUID:    string(c.UID),
				names.LabelGrant:       class,
			},
			Annotations: map[string]string{
				names.MetalLBAddressPool:       names.PoolName(class),
				names.AnnotationClaimNamespace: c.Namespace,
				names.AnnotationClaimName:      c.Name,
				names.AnnotationFamily:         string(f),
				names.AnnotationClass:          class,
			},
		},
		Spec: placeholder.Spec(serviceFamily(f)),
	}
}

// assignedIP is the canonical address of family f MetalLB reports in the
// placeholder's status, "" while there is none.
func assignedIP(svc *corev1.Service, f iadv1alpha1.IPFamily) string {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		ip, err := names.ParseAddress(in.IP)
		if err != nil {
			continue
		}
		if addressFamily(ip.String()) == f {
			return ip.String()
		}
	}
	return ""
}

// ownedByAddress reports whether a placeholder carries an owner reference
// to an IPAddress; name "" matches any.
func ownedByAddress(svc *corev1.Service, name string) bool {
	for _, o := range svc.OwnerReferences {
		if o.Kind == "IPAddress" && o.APIVersion == iadv1alpha1.GroupVersion.String() && (name == "" || o.Name == name) {
			return true
		}
	}
	return false
}

// step is what the claim controller does next for one family.
type step int

const (
	// stepNone: the family is bound and nothing of ours is left to finish.
	stepNone step = iota
	// stepCreatePlaceholder: no address and no placeholder: reserve.
	stepCreatePlaceholder
	// stepWaitForMetalLB: the placeholder has no address yet: observe.
	stepWaitForMetalLB
	// stepRecord: the placeholder has an address: create the IPAddress,
	// then hand the placeholder over to it.
	stepRecord
	// stepHandOver: the IPAddress recording the placeholder's address is
	// bound to the claim, but the placeholder is not handed over to it yet.
	stepHandOver
	// stepDropSurplus: the family is bound by another address (the core
	// matched one meanwhile); the allocation placeholder is not needed.
	stepDropSurplus
	// stepWaitForName: the placeholder's name is taken by a hold placeholder
	// of an address that is not (or no longer) the claim's; wait for it to go.
	stepWaitForName
)

// String names the step for logs.
func (s step) String() string {
	return [...]string{"None", "CreatePlaceholder", "WaitForMetalLB", "Record", "HandOver", "DropSurplus", "WaitForName"}[s]
}

// recordedBy returns the address among bound that records the allocation
// placeholder ph: the one its address label names or, before the placeholder
// is labelled (the IPAddress is created first), the one of the address
// MetalLB assigned it. Nil when none does.
func recordedBy(f iadv1alpha1.IPFamily, bound []*iadv1alpha1.IPAddress, ph *corev1.Service) *iadv1alpha1.IPAddress {
	label, ip := ph.Labels[names.LabelAddress], assignedIP(ph, f)
	for _, a := range bound {
		if label != "" {
			if a.Name == label {
				return a
			}
			continue
		}
		if got, err := names.ParseAddress(a.Spec.Address); err == nil && ip != "" && got.String() == ip {
			return a
		}
	}
	return nil
}

// handedOver reports whether the placeholder is already handed over to a:
// a hold placeholder labelled with its name, owned by it, granted the
// class's pool and pinned to ip.
func handedOver(ph *corev1.Service, a *iadv1alpha1.IPAddress, ip, class string) bool {
	return ph.Labels[names.LabelPlaceholder] == names.PlaceholderHold && ph.Labels[names.LabelAddress] == a.Name &&
		ownedByAddress(ph, a.Name) && names.Granted(ph.Labels, class) &&
		(ip == "" || ph.Annotations[names.MetalLBLoadBalancerIPs] == ip)
}

// planFamily decides the next step for family f from the addresses bound
// to the claim for that family and the family's allocation placeholder (nil
// when it does not exist). It is the whole decision; each step re-derives
// it on the next pass, so a crash between two steps re-converges.
func planFamily(f iadv1alpha1.IPFamily, bound []*iadv1alpha1.IPAddress, ph *corev1.Service) step {
	if ph == nil {
		if len(bound) > 0 {
			return stepNone
		}
		return stepCreatePlaceholder
	}
	if ph.Labels[names.LabelPlaceholder] != names.PlaceholderAllocation {
		if len(bound) > 0 {
			return stepNone
		}
		return stepWaitForName
	}
	if len(bound) > 0 {
		if recordedBy(f, bound, ph) != nil {
			return stepHandOver
		}
		return stepDropSurplus
	}
	if assignedIP(ph, f) == "" {
		return stepWaitForMetalLB
	}
	return stepRecord
}

// isOrphan decides whether a placeholder is an orphan the driver deletes:
// an allocation placeholder whose claim is gone (claim nil) or is another
// claim with the same name (another uid), and which backs no IPAddress:
// no owner reference to one, and addr (the IPAddress its address label
// names, nil when absent) is not bound to the placeholder's claim.
func isOrphan(ph *corev1.Service, claim *iadv1alpha1.IPAddressClaim, addr *iadv1alpha1.IPAddress) bool {
	if ph.Labels[names.LabelPlaceholder] != names.PlaceholderAllocation {
		return false
	}
	uid := ph.Labels[names.LabelClaimUID]
	if claim != nil && string(claim.UID) == uid {
		return false
	}
	if ownedByAddress(ph, "") {
		return false
	}
	if label := ph.Labels[names.LabelAddress]; label != "" && addr != nil && addr.Name == label && addr.Spec.ClaimRef != nil {
		r := addr.Spec.ClaimRef
		if r.UID == uid {
			return false
		}
		if r.UID == "" && r.Namespace == ph.Annotations[names.AnnotationClaimNamespace] && r.Name == ph.Annotations[names.AnnotationClaimName] {
			return false
		}
	}
	return true
}

// describeBinding says in words what an IPAddress is bound to.
func describeBinding(a *iadv1alpha1.IPAddress) string {
	r := a.Spec.ClaimRef
	if r == nil {
		phase := string(a.Status.Phase)
		if phase == "" {
			phase = "no phase yet"
		}
		return fmt.Sprintf("is bound to no claim (%s)", phase)
	}
	if r.UID == "" {
		return fmt.Sprintf("is bound to claim %s/%s", r.Namespace, r.Name)
	}
	return fmt.Sprintf("is bound to claim %s/%s (uid %s)", r.Namespace, r.Name, r.UID)
}

// Event messages, one function each so their text is tested.

func msgWaitingForMetalLB(f iadv1alpha1.IPFamily, class string) string {
	return fmt.Sprintf("Waiting for MetalLB to assign an %s address from pool %s (class %s)", f, names.PoolName(class), class)
}

func msgPoolExhausted(f iadv1alpha1.IPFamily, class, metallb string) string {
	return fmt.Sprintf("MetalLB has no free %s address in pool %s (class %s): the pool is exhausted or has no %s range. "+
		"The claim stays Pending and proceeds as soon as an address is freed. MetalLB said: %s",
		f, names.PoolName(class), class, f, metallb)
}

func msgPoolNotReady(f iadv1alpha1.IPFamily, class, metallb string) string {
	return fmt.Sprintf("MetalLB does not know pool %s (class %s) yet, so it cannot assign an %s address; "+
		"the claim proceeds once the pool is rendered. MetalLB said: %s", names.PoolName(class), class, f, metallb)
}

func msgRetargeted(f iadv1alpha1.IPFamily, old, class string) string {
	if class == "" {
		return fmt.Sprintf("The claim is no longer this driver's to provision; its %s allocation placeholder drawing from IPAddressClass %s was deleted", f, old)
	}
	return fmt.Sprintf("The claim names IPAddressClass %s now; its %s allocation placeholder drawing from IPAddressClass %s was deleted, and the address is drawn from %s",
		class, f, old, class)
}

func msgClassFull(f iadv1alpha1.IPFamily, class string, used int, size float64) string {
	return fmt.Sprintf("Class %s has no free %s address: the ledger and the placeholders still waiting for MetalLB account for %d of its %.0f. "+
		"The claim stays Pending and the driver asks MetalLB for nothing until an address of the class is freed", class, f, used, size)
}

// msgClassRefused is the PoolNotReady message when the class controller
// refuses to render the class: the pool will not appear until the class is
// fixed.
func msgClassRefused(f iadv1alpha1.IPFamily, class, refusal string) string {
	return fmt.Sprintf("IPAddressClass %s is refused, so pool %s is not rendered and MetalLB cannot assign an %s address; "+
		"the claim proceeds once the class is fixed (see the class's Events). The refusal: %s", class, names.PoolName(class), f, refusal)
}

func msgWaitingForName(f iadv1alpha1.IPFamily, placeholder, address string) string {
	return fmt.Sprintf("The %s allocation placeholder's name %s is still taken by the hold placeholder of IPAddress %s, "+
		"which is not this claim's; the claim proceeds once that placeholder is gone", f, placeholder, address)
}

func msgRecorded(f iadv1alpha1.IPFamily, ip, address string) string {
	return fmt.Sprintf("Recorded %s address %s as IPAddress %s", f, ip, address)
}

func msgLedgerMismatch(f iadv1alpha1.IPFamily, ip string, existing *iadv1alpha1.IPAddress) string {
	return fmt.Sprintf("MetalLB assigned %s address %s to this claim, but IPAddress %s already exists and %s; "+
		"MetalLB and the ledger disagree, so the driver leaves both alone for an administrator to resolve",
		f, ip, existing.Name, describeBinding(existing))
}

// allocationFailure classifies the message of MetalLB's AllocationFailed
// Event on a placeholder into the reason and message recorded on the claim.
func allocationFailure(f iadv1alpha1.IPFamily, class, metallb string) (reason, message string) {
	if strings.Contains(metallb, "unknown pool") {
		return ReasonPoolNotReady, msgPoolNotReady(f, class, metallb)
	}
	return ReasonPoolExhausted, msgPoolExhausted(f, class, metallb)
}

// unrecorded counts the placeholders of family f (allocation and warm
// placeholders of one class) whose address no entry of the class's ledger
// records: MetalLB has not answered them yet, or the driver has not
// recorded the answer yet. Each one takes an address of the class's room
// that the ledger does not count.
func unrecorded(phs []corev1.Service, f iadv1alpha1.IPFamily, addrs []iadv1alpha1.IPAddress) int {
	n := 0
	answered := map[string]bool{}
	for i := range phs {
		if phs[i].Annotations[names.AnnotationFamily] != string(f) {
			continue
		}
		if ip := assignedIP(&phs[i], f); ip != "" {
			answered[ip] = true
		} else {
			n++
		}
	}
	for i := 0; i < len(addrs) && len(answered) > 0; i++ {
		delete(answered, addrs[i].Spec.Address)
	}
	return n + len(answered)
}

// classFull reports whether a class's ranges have no address of family f
// left: the addresses of f in the ledger (any phase, being deleted
// included: MetalLB holds them until their teardown) and drawn, the
// placeholders drawing from the class whose address the ledger does not
// record (unrecorded), fill them. It also returns that count and the number
// of addresses of f in the ranges. A class whose parameters do not parse is
// never called full: MetalLB decides then.
func classFull(c *iadv1alpha1.IPAddressClass, f iadv1alpha1.IPFamily, addrs []iadv1alpha1.IPAddress, drawn int) (bool, int, float64) {
	p, err := classparams.ParseParameters(c.Spec.Parameters)
	if err != nil {
		return false, 0, 0
	}
	v4, v6 := classparams.FamilySizes(p.Addresses)
	size := v4
	if f == iadv1alpha1.FamilyIPv6 {
		size = v6
	}
	used := drawn
	for i := range addrs {
		if addrs[i].Spec.ClassName == c.Name && addressFamily(addrs[i].Spec.Address) == f {
			used++
		}
	}
	return float64(used) >= size, used, size
}

// availableFor names an Available, unbound address of family f among a
// class's addresses, "" when there is none. The core binds such an address
// to a claim before it waits for provisioning, so the driver leaves the
// family to it.
func availableFor(addrs []iadv1alpha1.IPAddress, f iadv1alpha1.IPFamily) string {
	for i := range addrs {
		a := &addrs[i]
		if a.Status.Phase == iadv1alpha1.AddressAvailable && a.Spec.ClaimRef == nil &&
			a.DeletionTimestamp == nil && addressFamily(a.Spec.Address) == f {
			return a.Name
		}
	}
	return ""
}

// ledgerAnswer is what the ledger says about an address MetalLB assigned to
// a claim's allocation placeholder.
type ledgerAnswer int

const (
	// ledgerFree: no IPAddress records the address: record it.
	ledgerFree ledgerAnswer = iota
	// ledgerOurs: an IPAddress records it bound to this claim (a pass that
	// crashed after creating it): finish recording.
	ledgerOurs
	// ledgerGoing: only IPAddresses being deleted record it: wait until
	// they are gone, then record it.
	ledgerGoing
	// ledgerTaken: a live IPAddress records it for someone else: give it
	// back.
	ledgerTaken
)

// ledgerVerdict decides, from the IPAddresses recording an IP (the ledger
// looked up by address), whether the claim may record it. It returns the
// deciding entry too (nil for ledgerFree).
func ledgerVerdict(entries []iadv1alpha1.IPAddress, c *iadv1alpha1.IPAddressClaim) (ledgerAnswer, *iadv1alpha1.IPAddress) {
	var going *iadv1alpha1.IPAddress
	var taken *iadv1alpha1.IPAddress
	for i := range entries {
		a := &entries[i]
		switch {
		case bindsClaim(a, c.Namespace, c.Name, c.UID):
			return ledgerOurs, a
		case a.DeletionTimestamp != nil:
			if going == nil {
				going = a
			}
		case taken == nil:
			taken = a
		}
	}
	switch {
	case taken != nil:
		return ledgerTaken, taken
	case going != nil:
		return ledgerGoing, going
	}
	return ledgerFree, nil
}

// unsettledAddress names an IPAddress among a class's addresses, of family
// f, that the ledger holds but MetalLB might hand out right now: not being
// deleted, not Lost (outside the pool) or in Conflict (someone holds it),
// not attached to a workload, not reported Held, and not held by one of
// its placeholders (heldByPlaceholder, asked only for the addresses still
// in question). A claim does not ask MetalLB for a new address while one
// is: MetalLB would hand it that address, only for the driver to give it
// back. It returns nil when every address is settled.
func unsettledAddress(addrs []iadv1alpha1.IPAddress, f iadv1alpha1.IPFamily, heldByPlaceholder func(a *iadv1alpha1.IPAddress, ip string) bool) *iadv1alpha1.IPAddress {
	for i := range addrs {
		a := &addrs[i]
		ip, err := names.ParseAddress(a.Spec.Address)
		if err != nil || addressFamily(ip.String()) != f || a.DeletionTimestamp != nil {
			continue
		}
		switch a.Status.Phase {
		case iadv1alpha1.AddressLost, iadv1alpha1.AddressConflict:
			continue
		}
		if a.Status.AssociatedTo != nil || conditions.IsTrue(a.Status.Conditions, conditions.Held) {
			continue
		}
		if heldByPlaceholder(a, ip.String()) {
			continue
		}
		return a
	}
	return nil
}

func msgLedgerAddressReturned(f iadv1alpha1.IPFamily, ip string, entry *iadv1alpha1.IPAddress) string {
	return fmt.Sprintf("MetalLB assigned %s address %s to this claim's placeholder, but IPAddress %s records it and %s; "+
		"the driver gave it back (deleted the placeholder) instead of recording it, and draws again once every address "+
		"of the ledger is held", f, ip, entry.Name, describeBinding(entry))
}

func msgLedgerEntryGoing(f iadv1alpha1.IPFamily, ip string, entry *iadv1alpha1.IPAddress) string {
	return fmt.Sprintf("MetalLB assigned %s address %s to this claim, and IPAddress %s, which records it, is being deleted; "+
		"the driver records the address for this claim once that entry is gone", f, ip, entry.Name)
}

func msgWaitingForLedger(f iadv1alpha1.IPFamily, class string, a *iadv1alpha1.IPAddress) string {
	return fmt.Sprintf("IPAddress %s (%s) of class %s is in the ledger but not held in MetalLB right now (a handoff is under way); "+
		"the claim asks pool %s for an %s address once it is held again, so that MetalLB cannot hand it that address",
		a.Name, a.Spec.Address, class, names.PoolName(class), f)
}
