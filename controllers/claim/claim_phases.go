package claim

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/placeholder"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// cacheWait bounds how long a pass waits for the cache to show an object it
// has just created; past it, the pass fails and is retried.
const cacheWait = 10 * time.Second

// scope is what one pass over a claim works from.
type scope struct {
	claim *iadv1alpha1.IPAddressClaim
	class *iadv1alpha1.IPAddressClass
	// bound holds the addresses bound to the claim, by family.
	bound map[iadv1alpha1.IPFamily][]*iadv1alpha1.IPAddress
	// waitForCore is set when a family was not provisioned because an
	// Available address could serve it: the core binds those first.
	waitForCore bool
	// waitForLedger is set when a family was not provisioned because an
	// address of the ledger is unheld in MetalLB for the moment, or
	// because the address MetalLB assigned is recorded by an IPAddress
	// being deleted.
	waitForLedger bool
	// waitForRoom is set when a family was not provisioned because the
	// ledger shows the class full.
	waitForRoom bool
	// paused is the longest pause left of a family that was not
	// provisioned because the claim gave an address back a moment ago
	// (drawPauses).
	paused time.Duration
	// recheck is when to look again at a placeholder MetalLB refused for
	// lack of room the ledger shows (staleClearer).
	recheck time.Duration
}

// blockedOnClass reports whether the pass left the claim waiting on the
// state of its class's ledger (an address to be held again, to go, or
// room), which only an address's change ends: the address watch wakes
// such claims. A claim waiting for MetalLB is woken by its own placeholder.
func (s *scope) blockedOnClass() bool { return s.waitForCore || s.waitForLedger || s.waitForRoom }

// newScope fetches the claim's class and the addresses bound to it. It
// returns nil (and records why on the claim) when the class cannot be
// served by this driver, or when the core has not resolved a class yet.
func (r *Reconciler) newScope(ctx context.Context, claim *iadv1alpha1.IPAddressClaim) (*scope, error) {
	name := className(claim)
	if name == "" {
		log.FromContext(ctx).V(1).Info("the core has not resolved the claim's class yet")
		return nil, nil
	}
	class := &iadv1alpha1.IPAddressClass{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, class); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		class = nil
	}
	if problem := classProblem(name, class); problem != "" {
		if claim.Status.Phase != iadv1alpha1.ClaimBound {
			// A Bound claim never needs its class again.
			r.report(claim, "class", corev1.EventTypeWarning, ReasonClassNotServed, problem)
		}
		return nil, nil
	}
	r.report(claim, "class", "", "", "")

	var addrs iadv1alpha1.IPAddressList
	if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClaim: index.Key(claim.Namespace, claim.Name)}); err != nil {
		return nil, err
	}
	return &scope{claim: claim, class: class, bound: boundByFamily(claim, addrs.Items)}, nil
}

// reconcileFamily takes the next step for one family of the claim. It
// reports whether the family is bound when it returns.
func (r *Reconciler) reconcileFamily(ctx context.Context, s *scope, f iadv1alpha1.IPFamily) (bool, error) {
	ph, err := r.allocationPlaceholder(ctx, s.claim, f)
	if err != nil {
		return false, err
	}
	if ph != nil && r.written.Behind(client.ObjectKeyFromObject(ph).String(), ph.ResourceVersion) {
		// The placeholder's own event brings the claim back once the
		// cache shows the patch.
		log.FromContext(ctx).V(1).Info("the cache has not shown this controller's last patch of the placeholder yet", "placeholder", ph.Name)
		return len(s.bound[f]) > 0, nil
	}
	st := planFamily(f, s.bound[f], ph)
	log.FromContext(ctx).V(1).Info("family", "family", f, "step", st.String())
	if st != stepWaitForMetalLB && st != stepWaitForName {
		r.report(s.claim, string(f), "", "", "") // the next wait is a change again
	}
	if st == stepNone {
		r.pauses.forget(memoKey(s.claim, f))
	}
	switch st {
	case stepCreatePlaceholder:
		return false, r.createPlaceholder(ctx, s, f)
	case stepWaitForMetalLB:
		return false, r.observe(ctx, s, f, ph)
	case stepRecord:
		return r.record(ctx, s, f, ph)
	case stepHandOver:
		if a := recordedBy(f, s.bound[f], ph); a != nil {
			return true, r.handOver(ctx, s, f, ph, a)
		}
		return true, nil
	case stepDropSurplus:
		return true, r.dropSurplus(ctx, ph)
	case stepWaitForName:
		log.FromContext(ctx).Info("the allocation placeholder's name is held for another address; waiting for it to go",
			"family", f, "placeholder", ph.Name, "ipaddress", ph.Labels[names.LabelAddress])
		r.report(s.claim, string(f), corev1.EventTypeNormal, ReasonWaitingForName, msgWaitingForName(f, ph.Name, ph.Labels[names.LabelAddress]))
		return false, nil
	default:
		return true, nil
	}
}

// allocationPlaceholder reads the family's placeholder from the cache; nil
// when it does not exist.
func (r *Reconciler) allocationPlaceholder(ctx context.Context, claim *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily) (*corev1.Service, error) {
	ph := &corev1.Service{}
	key := types.NamespacedName{Namespace: r.PlaceholderNamespace, Name: names.AllocationPlaceholderName(claim.UID, string(f))}
	if err := r.Get(ctx, key, ph); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return ph, nil
}

// createPlaceholder is step 1, reserve: create the allocation placeholder.
// Its name is deterministic, so a racing pass collides on AlreadyExists
// instead of allocating twice.
func (r *Reconciler) createPlaceholder(ctx context.Context, s *scope, f iadv1alpha1.IPFamily) error {
	if d := r.pauses.left(memoKey(s.claim, f), time.Now()); d > 0 {
		log.FromContext(ctx).V(1).Info("gave an address back a moment ago; drawing again after a pause", "family", f, "pause", d)
		s.paused = max(s.paused, d)
		return nil
	}
	// From the ledger's reading to the cache showing the placeholder, no
	// other pass draws from the class (drawLocks).
	defer r.draws.lock(s.class.Name)()
	// The core matches Available addresses of the class before it waits for
	// the driver; provisioning now could bind the claim twice in one family.
	// Read only: the cache's own objects, not copies of the class's whole
	// ledger on every pass.
	var addrs iadv1alpha1.IPAddressList
	if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClass: s.class.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	if name := availableFor(addrs.Items, f); name != "" {
		log.FromContext(ctx).V(1).Info("an Available address can serve the family; leaving it to the core", "family", f, "ipaddress", name)
		s.waitForCore = true
		return nil
	}
	// MetalLB does not retry an allocation it could not make: never ask it
	// for an address the ledger and the class's ranges say it cannot give.
	drawn, err := r.unrecordedDraws(ctx, s.class.Name, f, addrs.Items)
	if err != nil {
		return err
	}
	if full, used, size := classFull(s.class, f, addrs.Items, drawn); full {
		log.FromContext(ctx).V(1).Info("the class is full; not asking MetalLB", "family", f, "used", used, "size", size)
		// Once per change: the claim waits through many passes while the
		// class stays full.
		if r.tell(s.claim, f, corev1.EventTypeWarning, ReasonPoolExhausted, msgClassFull(f, s.class.Name, used, size)) {
			allocationsTotal.WithLabelValues(s.class.Name, string(f), resultPoolExhausted).Inc()
		}
		s.waitForRoom = true
		return nil
	}

	// While an address of the ledger is unheld in MetalLB (a handoff or a
	// hold being re-armed), MetalLB would hand it to a new placeholder, and
	// the driver would have to give it back: wait until it is held again.
	if a := unsettledAddress(addrs.Items, f, r.heldByPlaceholder(ctx)); a != nil {
		log.FromContext(ctx).V(1).Info("an address of the ledger is not held in MetalLB right now; waiting", "family", f, "ipaddress", a.Name)
		r.tell(s.claim, f, corev1.EventTypeNormal, ReasonWaitingForLedger, msgWaitingForLedger(f, s.class.Name, a))
		s.waitForLedger = true
		return nil
	}

	// Creating reserves an address: make sure the claim is still there and
	// still ours, not just in a cache that may lag behind its deletion. Last
	// of the checks, as the only one on the API server: a claim the checks
	// above hold back (an Available address of the class is waiting for the
	// core, the class is full) costs no request.
	live := &iadv1alpha1.IPAddressClaim{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.claim), live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if live.UID != s.claim.UID || !served(live) {
		return nil
	}
	ph := renderPlaceholder(r.PlaceholderNamespace, s.claim, s.class.Name, f)
	if err := r.Create(ctx, ph); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // the cache lags; the placeholder's own event brings the claim back
		}
		return fmt.Errorf("create placeholder %s: %w", ph.Name, err)
	}
	log.FromContext(ctx).Info("created allocation placeholder", "family", f, "placeholder", ph.Name, "pool", names.PoolName(s.class.Name))
	r.untell(s.claim, f)
	r.Recorder.Event(s.claim, corev1.EventTypeNormal, ReasonWaitingForMetalLB, msgWaitingForMetalLB(f, s.class.Name))
	return r.waitForCache(ctx, ph)
}

// unrecordedDraws counts what takes room in a class beside its ledger:
// the allocation and warm placeholders of the family whose address no
// entry of the ledger (addrs) records yet, answered by MetalLB or not.
func (r *Reconciler) unrecordedDraws(ctx context.Context, class string, f iadv1alpha1.IPFamily, addrs []iadv1alpha1.IPAddress) (int, error) {
	phs, err := drawnPlaceholders(ctx, r.Client, r.PlaceholderNamespace, class)
	if err != nil {
		return 0, err
	}
	return unrecorded(phs, f, addrs), nil
}

// drawnPlaceholders lists, read only, the allocation and warm placeholders
// drawing from a class (not handed over yet).
func drawnPlaceholders(ctx context.Context, c client.Reader, namespace, class string) ([]corev1.Service, error) {
	var phs corev1.ServiceList
	if err := c.List(ctx, &phs, client.InNamespace(namespace), client.MatchingFields{index.PlaceholderDrawnByClass: class},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return phs.Items, nil
}

// observe is step 2 while MetalLB has assigned nothing: keep the placeholder
// drawing from the class pool, and tell the claim's owner when MetalLB
// reports it cannot allocate. MetalLB retries by itself when addresses free
// up or pools change; the placeholder's status change then brings the claim
// back here.
func (r *Reconciler) observe(ctx context.Context, s *scope, f iadv1alpha1.IPFamily, ph *corev1.Service) error {
	if pool := names.PoolName(s.class.Name); ph.Annotations[names.MetalLBAddressPool] != pool || !names.Granted(ph.Labels, s.class.Name) {
		if err := r.patchPlaceholder(ctx, ph, func() {
			if ph.Annotations == nil {
				ph.Annotations = map[string]string{}
			}
			if ph.Labels == nil {
				ph.Labels = map[string]string{}
			}
			ph.Annotations[names.MetalLBAddressPool] = pool
			ph.Annotations[names.AnnotationClass] = s.class.Name
			// The class pool admits only placeholders carrying the grant
			// label (a placeholder created by an older driver gains it here).
			ph.Labels[names.LabelGrant] = s.class.Name
		}); err != nil {
			return fmt.Errorf("point placeholder %s at pool %s: %w", ph.Name, pool, err)
		}
		return nil
	}

	var evs corev1.EventList
	if err := r.List(ctx, &evs, client.InNamespace(r.PlaceholderNamespace),
		client.MatchingFields{index.EventByInvolvedUID: string(ph.UID)}); err != nil {
		return err
	}
	failure := latestAllocationFailure(evs.Items)
	if failure == nil {
		return nil
	}
	reason, msg := allocationFailure(f, s.class.Name, failure.Message)
	if reason == ReasonPoolNotReady {
		refusal, err := r.classRefusal(ctx, s.class)
		if err != nil {
			return err
		}
		if refusal != "" {
			msg = msgClassRefused(f, s.class.Name, refusal)
		}
	}
	// Once per change: MetalLB says the same on every pass while nothing
	// changes, and each pass must not count another exhaustion.
	if r.report(s.claim, string(f), corev1.EventTypeWarning, reason, msg) && reason == ReasonPoolExhausted {
		allocationsTotal.WithLabelValues(s.class.Name, string(f), resultPoolExhausted).Inc()
	}
	if reason != ReasonPoolExhausted {
		return nil
	}
	return r.clearFree(ctx, s, f, stale.EventFirstTime(failure), ph)
}

// clearFree asks the staleClearer to look for stale allocations of the
// class's free addresses in MetalLB, which refused the claim's placeholder
// for lack of room since refusedSince.
func (r *Reconciler) clearFree(ctx context.Context, s *scope, f iadv1alpha1.IPFamily, refusedSince time.Time, ph *corev1.Service) error {
	defer r.draws.lock(s.class.Name)()
	var addrs iadv1alpha1.IPAddressList
	if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClass: s.class.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	drawn, err := r.unrecordedDraws(ctx, s.class.Name, f, addrs.Items)
	if err != nil {
		return err
	}
	wait, err := (&staleClearer{Deps: r.Deps, cleared: &r.cleared}).clearFree(ctx, s.class, f, addrs.Items, drawn, refusedSince, []*corev1.Service{ph})
	if wait > 0 && (s.recheck == 0 || wait < s.recheck) {
		s.recheck = wait
	}
	return err
}

// latestAllocationFailure is the most recent AllocationFailed Event of a
// list, nil when there is none.
func latestAllocationFailure(evs []corev1.Event) *corev1.Event {
	var latest *corev1.Event
	var at time.Time
	for i := range evs {
		e := &evs[i]
		if e.Reason != MetalLBAllocationFailed {
			continue
		}
		t := stale.EventTime(e)
		if latest == nil || t.After(at) {
			latest, at = e, t
		}
	}
	return latest
}

// record is step 3 once MetalLB has assigned an address, in two
// idempotent sub-steps: (a) create the IPAddress, pre-bound to the claim,
// (b) hand the placeholder over to it in one patch (label, pin, grant,
// owner reference). Until (b) the IPAddress controller knows the
// placeholder by the claim's uid and the IP it holds, and neither creates
// a hold for the address nor releases it. It reports whether the family
// ended bound.
func (r *Reconciler) record(ctx context.Context, s *scope, f iadv1alpha1.IPFamily, ph *corev1.Service) (bool, error) {
	ip := assignedIP(ph, f)
	addr, _ := names.ParseAddress(ip) // assignedIP returns only parsed, canonical addresses
	addrName, err := names.AddressName(addr)
	if err != nil {
		return false, err
	}

	// Ask the ledger (the cache) before anything is written: an address
	// another IPAddress records is given back, never recorded, labelled or
	// pinned. An entry the cache does not show yet is met by the Create,
	// and judged the same way (ensureAddress).
	var entries iadv1alpha1.IPAddressList
	if err := r.List(ctx, &entries, client.MatchingFields{index.AddressByIP: ip}); err != nil {
		return false, err
	}
	verdict, entry := ledgerVerdict(entries.Items, s.claim)
	if verdict == ledgerOurs {
		addrName = entry.Name
	}
	if verdict == ledgerFree || verdict == ledgerOurs {
		if pin := ph.Annotations[names.MetalLBLoadBalancerIPs]; pin != "" && !slices.Equal(names.SplitIPs(pin), []string{ip}) {
			log.FromContext(ctx).Info("the placeholder is pinned to another address than MetalLB reports; waiting for MetalLB",
				"placeholder", ph.Name, "pinned", pin, "assigned", ip)
			return false, nil
		}
		// (a) Create the IPAddress, pre-bound to the claim.
		a, err := r.ensureAddress(ctx, s, ip, addrName)
		if err != nil || a == nil {
			return false, err
		}
		if bindsClaim(a, s.claim.Namespace, s.claim.Name, s.claim.UID) {
			// (b) Hand the placeholder over to the IPAddress.
			return true, r.handOver(ctx, s, f, ph, a)
		}
		if got, err := names.ParseAddress(a.Spec.Address); err != nil || got.String() != ip {
			// The name is taken by an entry for another address.
			r.Recorder.Event(s.claim, corev1.EventTypeWarning, ReasonLedgerMismatch, msgLedgerMismatch(f, ip, a))
			allocationsTotal.WithLabelValues(s.class.Name, string(f), resultLedgerMismatch).Inc()
			log.FromContext(ctx).Info("ledger mismatch: the name of the address MetalLB assigned is recorded for another address",
				"family", f, "ip", ip, "ipaddress", a.Name)
			return false, nil
		}
		verdict, entry = ledgerVerdict([]iadv1alpha1.IPAddress{*a}, s.claim)
	}
	switch verdict {
	case ledgerTaken:
		return false, r.giveBack(ctx, s, f, ph, ip, entry)
	case ledgerGoing:
		log.FromContext(ctx).Info("the address MetalLB assigned is recorded by an IPAddress being deleted; waiting for it to go",
			"family", f, "ip", ip, "ipaddress", entry.Name)
		r.tell(s.claim, f, corev1.EventTypeNormal, ReasonWaitingForLedger, msgLedgerEntryGoing(f, ip, entry))
		s.waitForLedger = true
	}
	return false, nil
}

// giveBack gives back an address an allocation placeholder of the claim
// was assigned that the ledger records for someone else (giveBack), and
// tells the claim. The claim draws again once every address of the ledger
// is held (createPlaceholder).
func (r *Reconciler) giveBack(ctx context.Context, s *scope, f iadv1alpha1.IPFamily, ph *corev1.Service, ip string, entry *iadv1alpha1.IPAddress) error {
	if gave, err := giveBack(ctx, r, s.class.Name, f, ph, ip, entry); err != nil || !gave {
		return err
	}
	s.paused = max(s.paused, r.pauses.gaveBack(memoKey(s.claim, f), ip, time.Now()))
	r.Recorder.Event(s.claim, corev1.EventTypeNormal, ReasonLedgerAddressReturned, msgLedgerAddressReturned(f, ip, entry))
	return nil
}

// giveBack deletes a placeholder (of a claim, or a warm one of class) that
// MetalLB assigned an address ip the ledger records for someone else
// (entry), which frees the address in MetalLB for its owner. The
// preconditions make sure it is exactly the placeholder the pass looked
// at. It reports whether it deleted it: one already gone is no error.
func giveBack(ctx context.Context, c client.Writer, class string, f iadv1alpha1.IPFamily, ph *corev1.Service, ip string, entry *iadv1alpha1.IPAddress) (bool, error) {
	err := c.Delete(ctx, ph, client.Preconditions{UID: &ph.UID, ResourceVersion: &ph.ResourceVersion})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("give back %s: delete placeholder %s: %w", ip, ph.Name, err)
	}
	log.FromContext(ctx).Info("gave back an address the ledger records for someone else", "family", f, "ip", ip,
		"ipaddress", entry.Name, "placeholder", ph.Name)
	allocationsTotal.WithLabelValues(class, string(f), resultReturned).Inc()
	return true, nil
}

// heldByPlaceholder returns a function reporting whether one of the
// placeholders labelled with an address holds its IP in MetalLB (from the
// cache), or, before the hand-over, the allocation placeholder of the
// claim the address is bound to.
func (r *Reconciler) heldByPlaceholder(ctx context.Context) func(a *iadv1alpha1.IPAddress, ip string) bool {
	return heldByPlaceholder(ctx, r.Client, r.PlaceholderNamespace)
}

func heldByPlaceholder(ctx context.Context, c client.Reader, namespace string) func(a *iadv1alpha1.IPAddress, ip string) bool {
	return func(a *iadv1alpha1.IPAddress, ip string) bool {
		lookups := []client.MatchingFields{{index.PlaceholderByAddress: a.Name}}
		if ref := a.Spec.ClaimRef; ref != nil && ref.UID != "" {
			lookups = append(lookups, client.MatchingFields{index.PlaceholderByClaimUID: ref.UID})
		}
		for _, m := range lookups {
			var phs corev1.ServiceList
			if err := c.List(ctx, &phs, client.InNamespace(namespace), m); err != nil {
				return false
			}
			for i := range phs.Items {
				if phs.Items[i].DeletionTimestamp == nil && assignedIP(&phs.Items[i], addressFamily(ip)) == ip {
					return true
				}
			}
		}
		return false
	}
}

// ensureAddress returns the IPAddress named addrName, creating it bound to
// the claim when it does not exist. The caller checks whose it is. It
// returns nil, creating nothing, when the API server shows the claim gone,
// replaced or no longer naming the scope's class.
func (r *Reconciler) ensureAddress(ctx context.Context, s *scope, ip, addrName string) (*iadv1alpha1.IPAddress, error) {
	existing := &iadv1alpha1.IPAddress{}
	err := r.Get(ctx, types.NamespacedName{Name: addrName}, existing)
	if err == nil {
		return existing, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}

	// Creating records the address for the claim: make sure the claim is
	// still there and still names this class, not just in a cache that may
	// lag behind its deletion or a change of class.
	live := &iadv1alpha1.IPAddressClaim{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.claim), live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	if live.UID != s.claim.UID || !served(live) || className(live) != s.class.Name {
		log.FromContext(ctx).Info("the claim is gone or no longer names the class; not recording the address",
			"ip", ip, "class", s.class.Name)
		return nil, nil
	}

	a := renderAddress(s.claim, s.class, ip, addrName)
	if err := r.Create(ctx, a); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create IPAddress %s: %w", addrName, err)
		}
		// Someone has it; the cache has not shown it yet. Ask the API server.
		if err := r.APIReader.Get(ctx, types.NamespacedName{Name: addrName}, existing); err != nil {
			return nil, err
		}
		return existing, nil
	}
	log.FromContext(ctx).Info("created IPAddress", "ipaddress", addrName, "ip", ip)
	return a, r.waitForCache(ctx, a)
}

// renderAddress is the IPAddress recording a freshly allocated address for
// a claim: claimRef pre-set with the claim's uid, the class and its reclaim
// policy, source fromClass, and the driver's teardown finalizer.
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

// handOver is step 3b, in one patch of the placeholder: label it a hold
// placeholder of the IPAddress, grant it the class's pool, pin it to the
// address MetalLB assigned (so a MetalLB restart cannot hand it another)
// and owner-reference it to the IPAddress. From here the IPAddress
// controller owns it. No sharing key: MetalLB reprocesses every Service
// when a Service's allocation first carries one, so the key is written
// only when a workload is about to share the address (by the IPAddress
// controller, for the shared handoff). One write, so MetalLB, which
// rewrites a Service's status on each change it sees, sees one.
func (r *Reconciler) handOver(ctx context.Context, s *scope, f iadv1alpha1.IPFamily, ph *corev1.Service, a *iadv1alpha1.IPAddress) error {
	ip := assignedIP(ph, f)
	if handedOver(ph, a, ip, s.class.Name) {
		return nil
	}
	if err := r.patchPlaceholder(ctx, ph, func() {
		if !ownedByAddress(ph, a.Name) {
			ph.OwnerReferences = append(ph.OwnerReferences, placeholder.OwnerRef(a))
		}
		if ph.Annotations == nil {
			ph.Annotations = map[string]string{}
		}
		ph.Labels[names.LabelPlaceholder] = names.PlaceholderHold
		ph.Labels[names.LabelAddress] = a.Name
		ph.Labels[names.LabelGrant] = s.class.Name
		if ip != "" {
			ph.Annotations[names.MetalLBLoadBalancerIPs] = ip
		}
	}); err != nil {
		return fmt.Errorf("hand placeholder %s over to IPAddress %s: %w", ph.Name, a.Name, err)
	}
	log.FromContext(ctx).Info("recorded address", "family", f, "ip", a.Spec.Address, "ipaddress", a.Name, "placeholder", ph.Name)
	r.untell(s.claim, f)
	r.Recorder.Event(s.claim, corev1.EventTypeNormal, ReasonRecorded, msgRecorded(f, a.Spec.Address, a.Name))
	allocationsTotal.WithLabelValues(s.class.Name, string(f), resultRecorded).Inc()
	return nil
}

// dropRetargeted deletes the claim's allocation placeholders that still
// draw for another class than class, the one the claim names now ("" when
// the claim is no longer this driver's): a Pending claim retargeted to
// another class, or to one that does not exist, must get nothing from the
// old one. The family is then drawn again from the new class, if any.
func (r *Reconciler) dropRetargeted(ctx context.Context, claim *iadv1alpha1.IPAddressClaim, class string) error {
	for _, f := range iadv1alpha1.FamilyDual.Families() {
		ph, err := r.allocationPlaceholder(ctx, claim, f)
		if err != nil {
			return err
		}
		if !retargeted(ph, class) {
			continue
		}
		err = r.Delete(ctx, ph, client.Preconditions{UID: &ph.UID, ResourceVersion: &ph.ResourceVersion})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete placeholder %s of a class the claim no longer names: %w", ph.Name, err)
		}
		old := ph.Annotations[names.AnnotationClass]
		log.FromContext(ctx).Info("deleted the allocation placeholder of a class the claim no longer names", "placeholder", ph.Name, "was", old, "now", class)
		r.Recorder.Event(claim, corev1.EventTypeNormal, ReasonRetargeted, msgRetargeted(f, old, class))
	}
	return nil
}

// dropSurplus deletes an allocation placeholder the claim no longer needs
// (the family was bound by another address meanwhile), releasing its
// address in MetalLB. The preconditions make sure it is exactly the
// placeholder this pass looked at.
func (r *Reconciler) dropSurplus(ctx context.Context, ph *corev1.Service) error {
	err := r.Delete(ctx, ph, client.Preconditions{UID: &ph.UID, ResourceVersion: &ph.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete surplus placeholder %s: %w", ph.Name, err)
	}
	log.FromContext(ctx).Info("deleted surplus allocation placeholder: the family is bound by another address", "placeholder", ph.Name)
	return nil
}

// waitForCache waits until the cache shows an object this pass created, so
// no later pass acts as if it did not exist. It stops early when the object
// is already gone from the API server (deleted right after its creation):
// then there is nothing left to wait for.
func (r *Reconciler) waitForCache(ctx context.Context, obj client.Object) error {
	return patch.WaitForCache(ctx, r.Client, r.APIReader, obj, nil, cacheWait)
}

// report records an Event on the claim once per change of what is said
// about one of its concerns (key: a family, or "class"), not on every
// pass. An empty reason says there is nothing to report about it now, so
// the next report is a change again. It reports whether it recorded.
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

// classRefusal says why the class controller refuses to render the class,
// judged by the same pure functions from the cached classes: its name, its
// parameters, or ranges overlapping an older class of this driver. ""
// when none of these refuses it.
func (r *Reconciler) classRefusal(ctx context.Context, class *iadv1alpha1.IPAddressClass) (string, error) {
	var classes iadv1alpha1.IPAddressClassList
	if err := r.List(ctx, &classes); err != nil {
		return "", err
	}
	return classparams.Refusal(class, classes.Items), nil
}

// patchPlaceholder patches an allocation placeholder (patch.Meta) and
// remembers the version the patch was locked to (written).
func (r *Reconciler) patchPlaceholder(ctx context.Context, ph *corev1.Service, change func()) error {
	before := ph.ResourceVersion
	if err := patch.Meta(ctx, r, ph, change); err != nil {
		return err
	}
	if ph.ResourceVersion != before {
		r.written.Wrote(client.ObjectKeyFromObject(ph).String(), before)
	}
	return nil
}
