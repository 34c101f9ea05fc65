package claim

import (
	"fmt"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// Event reasons the claim controller records on claims, and the warm
// controller on classes. They are stable: people and alerts match on them.
// The message functions below say what each one means.
const (
	ReasonWaitingForMetalLB = "WaitingForMetalLB" // Normal: MetalLB left a placeholder unanswered (metallbQuiet)
	// ReasonPoolExhausted (Warning): MetalLB or the ledger shows no room.
	ReasonPoolExhausted  = "PoolExhausted"
	ReasonPoolNotReady   = "PoolNotReady"   // Warning: MetalLB does not know the pool
	ReasonClassNotServed = "ClassNotServed" // Warning: the class is missing or not ours
	// ReasonNamespaceNotAdmitted (Warning): the class does not admit the
	// claim's namespace; nothing is drawn for it.
	ReasonNamespaceNotAdmitted = "NamespaceNotAdmitted"
	// ReasonNamespaceLimit (Warning): the namespace holds as many of the
	// class's addresses as the class allows one namespace.
	ReasonNamespaceLimit = "NamespaceLimit"
	ReasonRetargeted     = "Retargeted"
	// ReasonLedgerMismatch (Warning): the assigned address's IPAddress
	// name is taken by an entry for another address.
	ReasonLedgerMismatch = "LedgerMismatch"
	ReasonWaitingForName = "WaitingForName"
	// ReasonLedgerAddressReturned (Normal): the assigned address was
	// someone else's (unheld for a moment during a handoff): given back.
	ReasonLedgerAddressReturned = "LedgerAddressReturned"
	// ReasonWaitingForLedger (Normal): an address of the class is unheld,
	// or the assigned address's entry is being deleted.
	ReasonWaitingForLedger = "WaitingForLedger"
)

// allocationFailure turns MetalLB's refusal of a placeholder into the
// reason and message recorded on the claim.
func allocationFailure(f iadv1alpha1.IPFamily, class, metallb string) (reason, message string) {
	if stale.UnknownPool(metallb) {
		return ReasonPoolNotReady, msgPoolNotReady(f, class, metallb)
	}
	return ReasonPoolExhausted, msgPoolExhausted(f, class, metallb)
}

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

// msgClassRefused is the PoolNotReady message for a class the class
// controller refuses to render.
func msgClassRefused(f iadv1alpha1.IPFamily, class, refusal string) string {
	return fmt.Sprintf("IPAddressClass %s is refused, so pool %s is not rendered and MetalLB cannot assign an %s address; "+
		"the claim proceeds once the class is fixed (see the class's Events). The refusal: %s", class, names.PoolName(class), f, refusal)
}

func msgWaitingForName(f iadv1alpha1.IPFamily, placeholder, address string) string {
	return fmt.Sprintf("The %s allocation placeholder's name %s is still taken by the hold placeholder of IPAddress %s, "+
		"which is not this claim's; the claim proceeds once that placeholder is gone", f, placeholder, address)
}

func msgLedgerMismatch(f iadv1alpha1.IPFamily, ip string, existing *iadv1alpha1.IPAddress) string {
	return fmt.Sprintf("MetalLB assigned %s address %s to this claim, but IPAddress %s already exists and %s; "+
		"MetalLB and the ledger disagree, so the driver leaves both alone for an administrator to resolve",
		f, ip, existing.Name, draw.BindingWords(existing))
}

func msgLedgerAddressReturned(f iadv1alpha1.IPFamily, ip string, entry *iadv1alpha1.IPAddress) string {
	return fmt.Sprintf("MetalLB assigned %s address %s to this claim's placeholder, but IPAddress %s records it and %s; "+
		"the driver gave it back (deleted the placeholder) instead of recording it, and draws again once every address "+
		"of the ledger is held", f, ip, entry.Name, draw.BindingWords(entry))
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

func msgNamespaceNotAdmitted(class, ns string, t classparams.Tenancy) string {
	return fmt.Sprintf("IPAddressClass %q does not admit namespace %q (it admits the namespaces named in its parameters' namespaces, %d, "+
		"and those its %d namespaceSelectors select): the claim stays Pending and no address is drawn for it. "+
		"Ask an administrator to admit the namespace, or claim from another class", class, ns, len(t.Namespaces), len(t.NamespaceSelectors))
}

func msgNamespaceLimit(class, ns string, held, bound int) string {
	return fmt.Sprintf("Namespace %q holds %d of the %d addresses IPAddressClass %q allows one namespace (maxAddressesPerNamespace), "+
		"with no room for this claim's: the claim stays Pending and binds when an address of the namespace is released", ns, held, bound, class)
}

// msgClassMissing says the claim's class name does not exist yet.
func msgClassMissing(name string) string {
	return fmt.Sprintf("IPAddressClass %q does not exist; the claim waits until it is created", name)
}

// msgClassNotServed says class name is another provisioner's, not this
// driver's.
func msgClassNotServed(name, provisioner string) string {
	return fmt.Sprintf("IPAddressClass %q is served by provisioner %q, not by %s; this driver does not provision it",
		name, provisioner, names.Provisioner)
}

// memoKey names one family of one claim (by uid) in told and pauses.
func memoKey(c *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily) string {
	return string(c.UID) + "/" + string(f)
}

// tell records a waiting Event on the claim unless the same one was the
// last recorded for that family, and reports whether it recorded it.
func (r *Reconciler) tell(c *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily, eventType, reason, msg string) bool {
	if !r.told.Changed(memoKey(c, f), reason+"\x00"+msg) {
		return false
	}
	r.Recorder.Event(c, eventType, reason, msg)
	return true
}

// untell forgets the last waiting Event of a family that stopped waiting.
func (r *Reconciler) untell(c *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily) {
	r.told.Forget(memoKey(c, f))
}

// report records an Event on the claim once per change of what is said
// about one of its concerns (key: a family, or "class"). An empty reason
// says there is nothing to report now, so the next report is a change
// again. It reports whether it recorded.
func (r *Reconciler) report(claim *iadv1alpha1.IPAddressClaim, key, eventType, reason, msg string) bool {
	value := ""
	if reason != "" {
		value = string(claim.UID) + "\x00" + reason + "\x00" + msg
	}
	if !r.reported.Changed(reportKey(claim.Namespace, claim.Name)+key, value) || reason == "" {
		return false
	}
	r.Recorder.Event(claim, eventType, reason, msg)
	return true
}

// reportKey is the prefix of a claim's keys in the report memo.
func reportKey(namespace, name string) string { return namespace + "/" + name + "/" }
