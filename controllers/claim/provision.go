package claim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// The fallback looks of a claim that waits on its class's ledger; the
// address watch usually brings it back first.
const (
	// coreWait: an Available address could serve the claim; the core may
	// bind it to another claim.
	coreWait = 5 * time.Second
	// roomWait: the class is full. Room also frees when another claim's
	// waiting placeholder goes, which nothing maps to this claim.
	roomWait = 30 * time.Second
	// ledgerWait: an address of the ledger is unheld, or the entry of the
	// assigned address is being deleted.
	ledgerWait = 5 * time.Second
)

// waitForMetalLB is the result of a family whose placeholder waits for
// MetalLB; the placeholder's own status change brings the claim back.
var waitForMetalLB = phase.WaitFor("MetalLB has not assigned the placeholder an address", 0)

// scope is what one pass over a claim works from.
type scope struct {
	claim *iadv1alpha1.IPAddressClaim
	class *iadv1alpha1.IPAddressClass
	// bound holds the addresses bound to the claim, by family.
	bound map[iadv1alpha1.IPFamily][]*iadv1alpha1.IPAddress
	// unbound holds, per family of the claim, whether it still misses an
	// address at the end of the pass.
	unbound map[iadv1alpha1.IPFamily]bool
	// blocked is set when a family waits on the state of its class's
	// ledger, which only an address's change ends: the address watch wakes
	// such claims (addressToClaims).
	blocked bool
}

// waitOnClass is the result of a family that waits on its class's ledger.
func (s *scope) waitOnClass(reason string, fallback time.Duration) phase.Result {
	s.blocked = true
	return phase.WaitFor(reason, fallback)
}

// pending reports whether a family of the claim still misses an address.
func (s *scope) pending() bool {
	for _, u := range s.unbound {
		if u {
			return true
		}
	}
	return false
}

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
		if claim.Status.Phase != iadv1alpha1.ClaimBound { // a Bound claim never needs its class again
			r.report(claim, "class", corev1.EventTypeWarning, ReasonClassNotServed, problem)
		}
		return nil, nil
	}
	r.report(claim, "class", "", "", "")

	var addrs iadv1alpha1.IPAddressList
	if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClaim: index.Key(claim.Namespace, claim.Name)}); err != nil {
		return nil, err
	}
	s := &scope{claim: claim, class: class, bound: boundByFamily(claim, addrs.Items), unbound: map[iadv1alpha1.IPFamily]bool{}}
	for _, f := range claim.Spec.Family.Families() {
		s.unbound[f] = len(s.bound[f]) == 0
	}
	return s, nil
}

// familyPhases are the phases of a pass: one per family of the claim.
func (r *Reconciler) familyPhases(claim *iadv1alpha1.IPAddressClaim) []phase.Phase[*scope] {
	var out []phase.Phase[*scope]
	for _, f := range claim.Spec.Family.Families() {
		out = append(out, phase.Phase[*scope]{Name: string(f), Run: func(ctx context.Context, s *scope) (phase.Result, error) {
			bound, res, err := r.reconcileFamily(ctx, s, f)
			s.unbound[f] = !bound
			return res, err
		}})
	}
	return out
}

// reconcileFamily takes the next step for one family of the claim
// (planFamily). It reports whether the family is bound when it returns.
func (r *Reconciler) reconcileFamily(ctx context.Context, s *scope, f iadv1alpha1.IPFamily) (bool, phase.Result, error) {
	ph, err := r.allocationPlaceholder(ctx, s.claim, f)
	if err != nil {
		return false, phase.Next(), err
	}
	if ph != nil && r.written.Behind(client.ObjectKeyFromObject(ph).String(), ph.ResourceVersion) {
		log.FromContext(ctx).V(1).Info("the cache has not shown this controller's last patch of the placeholder yet", "placeholder", ph.Name)
		return len(s.bound[f]) > 0, phase.WaitFor("the cache has not shown the last patch of the placeholder", 0), nil
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
		res, err := r.createPlaceholder(ctx, s, f)
		return false, res, err
	case stepWaitForMetalLB:
		res, err := r.observe(ctx, s, f, ph)
		return false, res, err
	case stepRecord:
		return r.draw(s, f).record(ctx, ph)
	case stepHandOver:
		if a := recordedBy(f, s.bound[f], ph); a != nil {
			res, err := r.draw(s, f).handOver(ctx, ph, a)
			return true, res, err
		}
	case stepDropSurplus:
		return true, phase.Next(), r.dropSurplus(ctx, ph)
	case stepWaitForName:
		log.FromContext(ctx).Info("the allocation placeholder's name is held for another address; waiting for it to go",
			"family", f, "placeholder", ph.Name, "ipaddress", ph.Labels[names.LabelAddress])
		r.report(s.claim, string(f), corev1.EventTypeNormal, ReasonWaitingForName, msgWaitingForName(f, ph.Name, ph.Labels[names.LabelAddress]))
		return false, phase.WaitFor("the placeholder's name is held for another address", 0), nil
	}
	return true, phase.Next(), nil
}

// allocationPlaceholder reads the family's placeholder from the cache; nil
// when it does not exist.
func (r *Reconciler) allocationPlaceholder(ctx context.Context, claim *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily) (*corev1.Service, error) {
	ph := &corev1.Service{}
	key := types.NamespacedName{Namespace: r.PlaceholderNamespace, Name: names.AllocationPlaceholderName(claim.UID, string(f))}
	if err := r.Get(ctx, key, ph); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return ph, nil
}

// createPlaceholder is the first step of a claim's draw: it decides, under
// the class's lock and from memory only (decide), whether MetalLB may be
// asked for an address now, entering the draw in the class's book of draws
// in flight; then, the lock let go, it tells the claim why it waits or
// creates the placeholder. Draws of one class overlap: the book, not the
// lock, keeps each from missing the others.
func (r *Reconciler) createPlaceholder(ctx context.Context, s *scope, f iadv1alpha1.IPFamily) (phase.Result, error) {
	if d := r.pauses.left(memoKey(s.claim, f), time.Now()); d > 0 {
		log.FromContext(ctx).V(1).Info("gave an address back a moment ago; drawing again after a pause", "family", f, "pause", d)
		return phase.RetryAfter(d, "gave an address back a moment ago"), nil
	}
	name := names.AllocationPlaceholderName(s.claim.UID, string(f))
	book := r.draws.of(s.class.Name)
	d, already, err := r.decide(ctx, s, f, book, name)
	switch {
	case err != nil:
		return phase.Next(), err
	case already:
		// Created a moment ago; its watch event brings the claim back.
		return phase.WaitFor("the cache has not shown the placeholder yet", inflightMax), nil
	case d.verdict != drawNow:
		return r.holdBack(ctx, s, f, d), nil
	}
	created, res, err := r.draw(s, f).start(ctx)
	switch {
	case err != nil:
		book.settle(name)
	case !created && r.Get(ctx, types.NamespacedName{Namespace: r.PlaceholderNamespace, Name: name}, &corev1.Service{}) == nil:
		book.settle(name) // it existed, and the cache shows it
	}
	return res, err
}

// decide decides the draw of family f for the scope's claim under the
// class's lock, from the cache and the book alone, and enters it in the
// book when the claim may draw now. already reports that the claim's own
// draw is in the book.
func (r *Reconciler) decide(ctx context.Context, s *scope, f iadv1alpha1.IPFamily, book *classBook, name string) (d drawDecision, already bool, err error) {
	book.decide.Lock()
	defer book.decide.Unlock()
	now := time.Now()
	if book.inBook(name, now) {
		return drawDecision{}, true, nil
	}
	addrs, drawn, inflight, err := r.classDraws(ctx, book, s.class.Name, f, now)
	if err != nil {
		return drawDecision{}, false, err
	}
	d = decideDraw(s.class, f, addrs, drawn, inflight, heldByPlaceholder(ctx, r.Client, r.PlaceholderNamespace))
	if d.verdict == drawNow {
		drawsInFlight.WithLabelValues(s.class.Name).Observe(float64(book.reserve(name, f, now)))
	}
	return d, false, nil
}

// holdBack tells the claim why its family does not draw now.
func (r *Reconciler) holdBack(ctx context.Context, s *scope, f iadv1alpha1.IPFamily, d drawDecision) phase.Result {
	logger := log.FromContext(ctx).V(1)
	switch d.verdict {
	case drawLeftToCore:
		logger.Info("an Available address can serve the family; leaving it to the core", "family", f, "ipaddress", d.available)
		return s.waitOnClass("an Available address is left to the core", coreWait)
	case drawClassFull:
		logger.Info("the class is full; not asking MetalLB", "family", f, "used", d.used, "size", d.size)
		if r.tell(s.claim, f, corev1.EventTypeWarning, ReasonPoolExhausted, msgClassFull(f, s.class.Name, d.used, d.size)) {
			allocationsTotal.WithLabelValues(s.class.Name, string(f), resultPoolExhausted).Inc()
		}
		return s.waitOnClass("the class is full", roomWait)
	}
	logger.Info("an address of the ledger is not held in MetalLB right now; waiting", "family", f, "ipaddress", d.unsettled.Name)
	r.tell(s.claim, f, corev1.EventTypeNormal, ReasonWaitingForLedger, msgWaitingForLedger(f, s.class.Name, d.unsettled))
	return s.waitOnClass("an address of the ledger is not held in MetalLB", ledgerWait)
}

// classDraws reads, in memory and without copies, what takes a class's
// room in family f: the draws in flight the cache does not show (inflight),
// the cached placeholders whose address the ledger does not record yet
// (drawn) and the ledger (addrs). They are read in that order, each
// before what a draw moves on to: one leaving the book is listed by then,
// one leaving the list recorded. The caller holds the class's lock.
func (r *Reconciler) classDraws(ctx context.Context, book *classBook, class string, f iadv1alpha1.IPFamily, now time.Time) (
	addrs []iadv1alpha1.IPAddress, drawn, inflight int, err error) {
	inBook := book.book(now)
	phs, err := drawnPlaceholders(ctx, r.Client, r.PlaceholderNamespace, class)
	if err != nil {
		return nil, 0, 0, err
	}
	var list iadv1alpha1.IPAddressList
	if err := r.List(ctx, &list, client.MatchingFields{index.AddressByClass: class}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, 0, 0, err
	}
	return list.Items, unrecorded(phs, f, list.Items), inFlight(inBook, f, phs, now), nil
}

// observe is the draw's step while MetalLB has assigned nothing: keep the
// placeholder drawing from the class pool, and tell the claim's owner when
// MetalLB refuses it. MetalLB retries by itself when addresses free up or
// pools change.
func (r *Reconciler) observe(ctx context.Context, s *scope, f iadv1alpha1.IPFamily, ph *corev1.Service) (phase.Result, error) {
	d := r.draw(s, f)
	if pool := names.PoolName(s.class.Name); marks.Of(ph).Pool != pool || !marks.Of(ph).Granted(s.class.Name) {
		if err := d.patch(ctx, ph, func() {
			if ph.Annotations == nil {
				ph.Annotations = map[string]string{}
			}
			ph.Annotations[names.AnnotationClass] = s.class.Name
			// The class pool admits only placeholders carrying the grant label.
			marks.Edit(ph, func(m *marks.Marks) { m.Pool, m.Grant = pool, s.class.Name })
		}); err != nil {
			return phase.Next(), fmt.Errorf("point placeholder %s at pool %s: %w", ph.Name, pool, err)
		}
		return waitForMetalLB, nil
	}
	failure, err := d.refusal(ctx, ph)
	if err != nil || failure == nil {
		return waitForMetalLB, err
	}
	reason, msg := allocationFailure(f, s.class.Name, failure.Message)
	if reason == ReasonPoolNotReady {
		refusal, err := r.classRefusal(ctx, s.class)
		if err != nil {
			return phase.Next(), err
		}
		if refusal != "" {
			msg = msgClassRefused(f, s.class.Name, refusal)
		}
	}
	// Once per change: MetalLB says the same on every pass, and each pass
	// must not count another exhaustion.
	if r.report(s.claim, string(f), corev1.EventTypeWarning, reason, msg) && reason == ReasonPoolExhausted {
		allocationsTotal.WithLabelValues(s.class.Name, string(f), resultPoolExhausted).Inc()
	}
	if reason != ReasonPoolExhausted {
		return waitForMetalLB, nil
	}
	return r.clearFree(ctx, s, f, stale.EventFirstTime(failure), ph)
}

// clearFree asks the staleClearer to look for stale allocations of the
// class's free addresses in MetalLB, which refused the claim's placeholder
// for lack of room since refusedSince.
func (r *Reconciler) clearFree(ctx context.Context, s *scope, f iadv1alpha1.IPFamily, refusedSince time.Time, ph *corev1.Service) (phase.Result, error) {
	book := r.draws.of(s.class.Name)
	book.decide.Lock()
	addrs, drawn, inflight, err := r.classDraws(ctx, book, s.class.Name, f, time.Now())
	book.decide.Unlock()
	if err != nil {
		return phase.Next(), err
	}
	wait, err := (&staleClearer{Deps: r.Deps, cleared: &r.cleared}).clearFree(ctx, s.class, f, addrs, drawn+inflight, refusedSince, []*corev1.Service{ph})
	if wait > 0 {
		return phase.RetryAfter(wait, "MetalLB refuses the placeholder while the ledger shows room"), err
	}
	return waitForMetalLB, err
}

// ensureAddress returns the IPAddress named addrName, creating it bound to
// the claim when it does not exist; the caller checks whose it is. It
// creates nothing, and returns nil, when the API server shows the claim
// gone, replaced or no longer naming the scope's class.
func (r *Reconciler) ensureAddress(ctx context.Context, s *scope, ip, addrName string) (*iadv1alpha1.IPAddress, error) {
	existing := &iadv1alpha1.IPAddress{}
	err := r.Get(ctx, types.NamespacedName{Name: addrName}, existing)
	if err == nil {
		return existing, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	// Creating records the address for the claim: ask the API server, not
	// a cache that may lag behind the claim's deletion or change of class.
	live := &iadv1alpha1.IPAddressClaim{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.claim), live); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if live.UID != s.claim.UID || !served(live) || className(live) != s.class.Name {
		log.FromContext(ctx).Info("the claim is gone or no longer names the class; not recording the address",
			"ip", ip, "class", s.class.Name)
		return nil, nil
	}
	a := renderAddress(s.claim, s.class, ip, addrName)
	created, err := patch.CreateAndWait(ctx, r.Client, r.APIReader, a, cacheWait)
	switch {
	case created:
		log.FromContext(ctx).Info("created IPAddress", "ipaddress", addrName, "ip", ip)
		return a, err
	case err != nil:
		return nil, fmt.Errorf("create IPAddress %s: %w", addrName, err)
	}
	// Someone has it and the cache has not shown it yet: ask the API server.
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: addrName}, existing); err != nil {
		return nil, err
	}
	return existing, nil
}

// dropRetargeted deletes the claim's allocation placeholders that still
// draw for another class than the one the claim names now (none when the
// claim is no longer this driver's): a Pending claim retargeted must get
// nothing from the old class. The family is drawn again from the new one.
func (r *Reconciler) dropRetargeted(ctx context.Context, claim *iadv1alpha1.IPAddressClaim) error {
	if claim.DeletionTimestamp != nil {
		return nil
	}
	class := ""
	if served(claim) {
		class = className(claim)
	}
	for _, f := range iadv1alpha1.FamilyDual.Families() {
		ph, err := r.allocationPlaceholder(ctx, claim, f)
		if err != nil {
			return err
		}
		if !retargeted(ph, class) {
			continue
		}
		switch deleted, err := patch.Delete(ctx, r.Client, ph, true); {
		case err != nil:
			return fmt.Errorf("delete placeholder %s of a class the claim no longer names: %w", ph.Name, err)
		case !deleted:
			continue
		}
		old := ph.Annotations[names.AnnotationClass]
		log.FromContext(ctx).Info("deleted the allocation placeholder of a class the claim no longer names", "placeholder", ph.Name, "was", old, "now", class)
		r.Recorder.Event(claim, corev1.EventTypeNormal, ReasonRetargeted, msgRetargeted(f, old, class))
	}
	return nil
}

// dropSurplus deletes an allocation placeholder the claim no longer needs
// (the family was bound by another address meanwhile), releasing its
// address in MetalLB.
func (r *Reconciler) dropSurplus(ctx context.Context, ph *corev1.Service) error {
	if _, err := patch.Delete(ctx, r.Client, ph, true); err != nil {
		return fmt.Errorf("delete surplus placeholder %s: %w", ph.Name, err)
	}
	log.FromContext(ctx).Info("deleted surplus allocation placeholder: the family is bound by another address", "placeholder", ph.Name)
	return nil
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

// classRefusal says why the class controller refuses to render the class,
// judged by the same pure functions from the cached classes; "" when it
// does not.
func (r *Reconciler) classRefusal(ctx context.Context, class *iadv1alpha1.IPAddressClass) (string, error) {
	var classes iadv1alpha1.IPAddressClassList
	if err := r.List(ctx, &classes); err != nil {
		return "", err
	}
	return classparams.Refusal(class, classes.Items), nil
}
