package claim

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// served reports whether the claim is this driver's to provision: stamped
// for it, not being deleted, and not asking for a specific address (the
// core's matching path).
func served(c *iadv1alpha1.IPAddressClaim) bool {
	return c.Annotations[iadv1alpha1.ProvisionerAnnotation] == names.Provisioner &&
		c.DeletionTimestamp == nil &&
		c.Spec.AddressName == ""
}

// className is the claim's class in the core's order: spec.className, else
// the sticky status.className the core resolved; the driver never resolves
// defaults itself.
func className(c *iadv1alpha1.IPAddressClaim) string {
	if c.Spec.ClassName != "" {
		return c.Spec.ClassName
	}
	return c.Status.ClassName
}

// retargeted reports whether ph is an allocation placeholder still drawing
// for another class than class, the one the claim names now.
func retargeted(ph *corev1.Service, class string) bool {
	return ph != nil && ph.Labels[names.LabelPlaceholder] == names.PlaceholderAllocation &&
		ph.Labels[names.LabelAddress] == "" && ph.DeletionTimestamp == nil &&
		ph.Annotations[names.AnnotationClass] != "" && ph.Annotations[names.AnnotationClass] != class
}

// classProblem explains why a class (nil: missing) cannot serve a claim of
// this driver; "" when it can.
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

// reclaimPolicy is the class's policy for a new address, Retain if unset.
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

// boundByFamily groups the addresses bound to the claim by family; a
// claimRef naming another uid is a stale binding and does not count.
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

// missingFamilies lists, IPv4 first, the claim's families not bound yet.
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

// renderPlaceholder is the allocation placeholder drawing the claim's
// address of one family from the class pool, named from the claim uid.
func renderPlaceholder(namespace string, c *iadv1alpha1.IPAddressClaim, class string, f iadv1alpha1.IPFamily) *corev1.Service {
	return marks.Mark(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      names.AllocationPlaceholderName(c.UID, string(f)),
			Labels: map[string]string{
				names.LabelPlaceholder: names.PlaceholderAllocation,
				names.LabelClaimUID:    string(c.UID),
			},
			Annotations: map[string]string{
				names.AnnotationClaimNamespace: c.Namespace,
				names.AnnotationClaimName:      c.Name,
				names.AnnotationFamily:         string(f),
				names.AnnotationClass:          class,
			},
		},
		Spec: placeholder.Spec(serviceFamily(f)),
	}, marks.Requests{Pool: names.PoolName(class), Grant: class})
}

// renderAddress is the IPAddress recording a drawn address for a claim,
// pre-bound to the claim's uid, with the driver's teardown finalizer.
func renderAddress(claim *iadv1alpha1.IPAddressClaim, class *iadv1alpha1.IPAddressClass, ip, addrName string) *iadv1alpha1.IPAddress {
	return &iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name:       addrName,
			Finalizers: []string{names.Finalizer},
		},
		Spec: iadv1alpha1.IPAddressSpec{
			Address:       ip,
			ClassName:     class.Name,
			ReclaimPolicy: reclaimPolicy(class),
			ClaimRef: &iadv1alpha1.ClaimReference{
				Namespace: claim.Namespace,
				Name:      claim.Name,
				UID:       string(claim.UID),
			},
			Source: iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}},
		},
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

// step is what the claim controller does next for one family (planFamily).
type step int

const (
	stepNone step = iota
	stepCreatePlaceholder
	stepWaitForMetalLB
	stepRecord
	// stepHandOver: the placeholder's IPAddress is bound, the placeholder
	// not handed over yet.
	stepHandOver
	// stepDropSurplus: the core bound the family another address.
	stepDropSurplus
	// stepWaitForName: the name is taken by another address's hold.
	stepWaitForName
)

func (s step) String() string {
	return [...]string{"None", "CreatePlaceholder", "WaitForMetalLB", "Record", "HandOver", "DropSurplus", "WaitForName"}[s]
}

// recordedBy returns the address among bound that records ph: the one its
// address label names or, before it is labelled, the one of the address
// MetalLB assigned it; nil when none does.
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

// handedOver reports whether ph is a's hold already: labelled, owned,
// granted the class's pool and pinned to ip.
func handedOver(ph *corev1.Service, a *iadv1alpha1.IPAddress, ip, class string) bool {
	return ph.Labels[names.LabelPlaceholder] == names.PlaceholderHold && ph.Labels[names.LabelAddress] == a.Name &&
		ownedByAddress(ph, a.Name) && marks.Of(ph).Granted(class) && (ip == "" || marks.Of(ph).Pin == ip)
}

// planFamily decides the next step for family f from its bound addresses
// and its allocation placeholder (nil: none). Each pass re-derives it, so a
// crash between two steps re-converges.
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

// isOrphan decides whether an allocation placeholder is an orphan: its
// claim is gone (nil) or replaced (another uid), and it backs no IPAddress
// (no owner reference, and addr, the one its label names, is not bound to
// its claim).
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

// unrecorded counts the placeholders of family f of a class whose address
// the ledger does not record (yet): each takes room the ledger misses.
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

// classFull reports whether the ledger's addresses of family f (being
// deleted included: MetalLB holds them until their teardown) and drawn
// fill the class's ranges, with that count and the ranges' size. A class
// whose parameters do not parse is never full: MetalLB decides then.
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
// class's addresses, "" when there is none.
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

// ledgerAnswer is what the ledger says about an address MetalLB assigned.
type ledgerAnswer int

const (
	ledgerFree ledgerAnswer = iota
	// ledgerOurs: its entry is the owner's: finish recording.
	ledgerOurs
	// ledgerGoing: only entries being deleted record it: wait.
	ledgerGoing
	// ledgerTaken: a live entry records it for someone else: give it back.
	ledgerTaken
)

// ledgerVerdict judges the entries recording an IP for claim c, with the
// deciding entry (nil for ledgerFree).
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

// unsettledAddress names an address of family f of the ledger that MetalLB
// might hand out right now: not being deleted, Lost (outside the pool) or
// in Conflict, not attached, not reported Held, and not held by one of its
// placeholders (heldByPlaceholder, asked last). Nil when all are settled.
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

// drawVerdict is whether a claim's family may ask MetalLB for an address now.
type drawVerdict int

const (
	// drawNow: nothing holds the draw back.
	drawNow drawVerdict = iota
	// drawLeftToCore: an Available address of the class can serve the
	// family. The core binds those before it waits for the driver;
	// drawing now could bind the claim twice in one family.
	drawLeftToCore
	// drawClassFull: the ledger and the draws fill the class's ranges.
	// MetalLB does not retry an allocation it could not make, so it is not
	// asked for what it cannot give.
	drawClassFull
	// drawLedgerUnsettled: an address of the ledger is unheld in MetalLB
	// (a handoff, or a hold being re-armed): MetalLB would hand it to the
	// new placeholder, and the driver would have to give it back.
	drawLedgerUnsettled
)

// drawDecision is decideDraw's verdict, with what the claim is told.
type drawDecision struct {
	verdict   drawVerdict
	available string                 // drawLeftToCore: the Available address
	used      int                    // drawClassFull: what takes room
	size      float64                // drawClassFull: the room in the ranges
	unsettled *iadv1alpha1.IPAddress // drawLedgerUnsettled: the unheld address
}

// decideDraw decides whether family f of a claim of class may ask MetalLB
// for an address, from the class's ledger (addrs), the cached draws it
// does not record yet (drawn, unrecorded), the draws in flight the cache
// does not show yet (inflight, inFlight) and held (heldByPlaceholder). It
// is the whole decision a pass makes under the class's lock: the room left
// is the class's size less the ledger, drawn and inflight.
func decideDraw(class *iadv1alpha1.IPAddressClass, f iadv1alpha1.IPFamily, addrs []iadv1alpha1.IPAddress, drawn, inflight int,
	held func(a *iadv1alpha1.IPAddress, ip string) bool) drawDecision {
	if name := availableFor(addrs, f); name != "" {
		return drawDecision{verdict: drawLeftToCore, available: name}
	}
	if full, used, size := classFull(class, f, addrs, drawn+inflight); full {
		return drawDecision{verdict: drawClassFull, used: used, size: size}
	}
	if a := unsettledAddress(addrs, f, held); a != nil {
		return drawDecision{verdict: drawLedgerUnsettled, unsettled: a}
	}
	return drawDecision{verdict: drawNow}
}
