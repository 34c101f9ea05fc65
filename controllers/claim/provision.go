package claim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// loadBound scopes the addresses bound to the claim, by family, and the
// families they leave unbound.
func (r *Reconciler) loadBound(ctx context.Context, s *scope) (phase.Result, error) {
	var addrs iadv1alpha1.IPAddressList
	if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClaim: index.Key(s.claim.Namespace, s.claim.Name)}); err != nil {
		r.forget(s.key)
		return phase.Next(), err
	}
	s.bound = boundByFamily(s.claim, addrs.Items)
	for _, f := range s.claim.Spec.Family.Families() {
		s.unbound[f] = len(s.bound[f]) == 0
	}
	return phase.Next(), nil
}

// provision is the phase of family f: its next step (reconcileFamily).
func (r *Reconciler) provision(f iadv1alpha1.IPFamily) phase.Phase[*scope] {
	return phase.Phase[*scope]{Name: "provision " + string(f), Run: func(ctx context.Context, s *scope) (phase.Result, error) {
		bound, res, err := r.reconcileFamily(ctx, s, f)
		s.unbound[f] = !bound
		return res, err
	}}
}

// reconcileFamily takes the next step for one family of the claim, as
// phases: planStep reads the family's allocation placeholder and decides
// the step (planFamily); the one phase named after that step acts, and the
// others pass. It reports whether the family is bound when it returns.
func (r *Reconciler) reconcileFamily(ctx context.Context, s *scope, f iadv1alpha1.IPFamily) (bool, phase.Result, error) {
	fs := &familyScope{scope: s, f: f}
	res, err := phase.Fold(ctx, fs,
		phase.Of(r.planStep),
		phase.Of(r.createPlaceholder), // stepCreatePlaceholder
		phase.Of(r.observe),           // stepWaitForMetalLB (await.go)
		phase.Of(r.clearFree),         // MetalLB refused it for lack of room (await.go)
		phase.Of(r.recordAddress),     // stepRecord
		phase.Of(r.handOver),          // stepHandOver
		phase.Of(r.dropSurplus),       // stepDropSurplus
		phase.Of(r.waitForName),       // stepWaitForName
	)
	return fs.isBound, res, err
}

// planStep reads the family's allocation placeholder and decides its step
// (planFamily); it waits while the cache has not shown this controller's
// last patch of the placeholder. A step other than a wait for MetalLB or
// for the name makes the next wait a change again (report).
func (r *Reconciler) planStep(ctx context.Context, fs *familyScope) (phase.Result, error) {
	s, f := fs.scope, fs.f
	ph, err := r.allocationPlaceholder(ctx, s.claim, f)
	if err != nil {
		return phase.Next(), err
	}
	fs.ph = ph
	if ph != nil && r.written.Behind(client.ObjectKeyFromObject(ph).String(), ph.ResourceVersion) {
		log.FromContext(ctx).V(1).Info("the cache has not shown this controller's last patch of the placeholder yet", "placeholder", ph.Name)
		fs.step, fs.isBound = stepWaitForCache, len(s.bound[f]) > 0
		return phase.WaitFor("the cache to show the last patch of the placeholder", 0), nil
	}
	fs.step = planFamily(f, s.bound[f], ph)
	fs.isBound = fs.step.bound()
	log.FromContext(ctx).V(1).Info("family", "family", f, "step", fs.step.String())
	if fs.step != stepWaitForMetalLB && fs.step != stepWaitForName {
		r.report(s.claim, string(f), "", "", "")
	}
	if fs.step == stepNone {
		r.pauses.Forget(memoKey(s.claim, f))
	}
	return phase.Next(), nil
}

// recordAddress records the address MetalLB assigned the placeholder (the draw
// pipeline's Record).
func (r *Reconciler) recordAddress(ctx context.Context, fs *familyScope) (phase.Result, error) {
	if fs.step != stepRecord {
		return phase.Next(), nil
	}
	bound, res, err := r.draw(fs.scope, fs.f).Record(ctx, fs.ph)
	fs.isBound = bound
	return res, err
}

// handOver hands the placeholder over to the address that records it
// (the draw pipeline's HandOver).
func (r *Reconciler) handOver(ctx context.Context, fs *familyScope) (phase.Result, error) {
	if fs.step != stepHandOver {
		return phase.Next(), nil
	}
	a := recordedBy(fs.f, fs.scope.bound[fs.f], fs.ph)
	if a == nil {
		return phase.Next(), nil
	}
	return r.draw(fs.scope, fs.f).HandOver(ctx, fs.ph, a)
}

// waitForName waits while the allocation placeholder's name is held by
// the hold of another address, and tells the claim.
func (r *Reconciler) waitForName(ctx context.Context, fs *familyScope) (phase.Result, error) {
	if fs.step != stepWaitForName {
		return phase.Next(), nil
	}
	s, f, ph := fs.scope, fs.f, fs.ph
	log.FromContext(ctx).Info("the allocation placeholder's name is held for another address; waiting for it to go",
		"family", f, "placeholder", ph.Name, "ipaddress", ph.Labels[marks.LabelAddress])
	r.report(s.claim, string(f), corev1.EventTypeNormal, ReasonWaitingForName, msgWaitingForName(f, ph.Name, ph.Labels[marks.LabelAddress]))
	return phase.WaitFor("the hold placeholder of another address to give up the name", 0), nil
}

// draw is the draw of family f for the scope's claim, its owner the
// claim (claimDraw, claim_draw.go).
func (r *Reconciler) draw(s *scope, f iadv1alpha1.IPFamily) draw.Draw {
	return draw.Draw{Deps: r.Deps, Owner: claimDraw{r: r, s: s, f: f}, Class: s.class.Name, F: f,
		What: "placeholder", Written: &r.written}
}

// allocationPlaceholder reads the family's placeholder from the cache; nil
// when it does not exist.
func (r *Reconciler) allocationPlaceholder(ctx context.Context, claim *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily) (*corev1.Service, error) {
	ph := &corev1.Service{}
	key := types.NamespacedName{Namespace: r.PlaceholderNamespace, Name: placeholder.AllocationName(claim.UID, string(f))}
	if err := r.Get(ctx, key, ph); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return ph, nil
}

// dropSurplus deletes an allocation placeholder the claim no longer needs
// (the family was bound by another address meanwhile), releasing its
// address in MetalLB.
func (r *Reconciler) dropSurplus(ctx context.Context, fs *familyScope) (phase.Result, error) {
	if fs.step != stepDropSurplus {
		return phase.Next(), nil
	}
	ph := fs.ph
	if _, err := patch.Delete(ctx, r.Client, ph, true); err != nil {
		return phase.Next(), fmt.Errorf("delete surplus placeholder %s: %w", ph.Name, err)
	}
	log.FromContext(ctx).Info("deleted surplus allocation placeholder: the family is bound by another address", "placeholder", ph.Name)
	return phase.Next(), nil
}

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

// createPlaceholder is the first step of a claim's draw: it decides, under
// the class's lock and from memory only (decide), whether MetalLB may be
// asked for an address now, entering the draw in the class's book of draws
// in flight; then, the lock let go, it tells the claim why it waits or
// creates the placeholder. Draws of one class overlap: the book, not the
// lock, keeps each from missing the others.
func (r *Reconciler) createPlaceholder(ctx context.Context, fs *familyScope) (phase.Result, error) {
	if fs.step != stepCreatePlaceholder {
		return phase.Next(), nil
	}
	s, f := fs.scope, fs.f
	if d := r.pauses.Left(memoKey(s.claim, f), time.Now()); d > 0 {
		log.FromContext(ctx).V(1).Info("gave an address back a moment ago; drawing again after a pause", "family", f, "pause", d)
		return phase.RetryAfter(d, "gave an address back a moment ago"), nil
	}
	name := placeholder.AllocationName(s.claim.UID, string(f))
	book := r.shared.Draws.Of(s.class.Name)
	d, already, err := r.decide(ctx, s, f, book, name)
	switch {
	case err != nil:
		return phase.Next(), err
	case already:
		// Created a moment ago; its watch event brings the claim back.
		return phase.WaitFor("the cache to show the placeholder", draw.InflightMax), nil
	case d.verdict != drawNow:
		return r.holdBack(ctx, s, f, d), nil
	}
	created, res, err := r.draw(s, f).StartPlaceholder(ctx)
	switch {
	case err != nil:
		book.Settle(name)
	case !created && r.Get(ctx, types.NamespacedName{Namespace: r.PlaceholderNamespace, Name: name}, &corev1.Service{}) == nil:
		book.Settle(name) // it existed, and the cache shows it
	}
	return res, err
}

// decide decides the draw of family f for the scope's claim under the
// class's lock, from the cache and the book alone, and enters it in the
// book when the claim may draw now. already reports that the claim's own
// draw is in the book.
func (r *Reconciler) decide(ctx context.Context, s *scope, f iadv1alpha1.IPFamily, book *draw.Book, name string) (d drawDecision, already bool, err error) {
	book.Decide.Lock()
	defer book.Decide.Unlock()
	now := time.Now()
	if book.InBook(name, now) {
		return drawDecision{}, true, nil
	}
	v, drawn, inflight, err := r.classDraws(ctx, book, s.class.Name, f, now)
	if err != nil {
		return drawDecision{}, false, err
	}
	d = decideDraw(s.class, f, v, drawn, inflight, r.shared.Holds.HeldBy)
	if d.verdict == drawNow {
		if d, err = r.namespaceBound(ctx, s, book, now); err != nil || d.verdict != drawNow {
			return d, false, err
		}
		draw.DrawsInFlight.WithLabelValues(s.class.Name).Observe(float64(book.ReserveFor(name, s.key, f, now)))
	}
	return d, false, nil
}

// holdBack tells the claim why its family does not draw now.
func (r *Reconciler) holdBack(ctx context.Context, s *scope, f iadv1alpha1.IPFamily, d drawDecision) phase.Result {
	logger := log.FromContext(ctx).V(1)
	switch d.verdict {
	case drawLeftToCore:
		logger.Info("an Available address can serve the family; leaving it to the core", "family", f, "ipaddress", d.available)
		return s.waitOnClass("the core to bind an Available address", coreWait)
	case drawNamespaceFull:
		logger.Info("the namespace holds what the class allows it; not asking MetalLB", "family", f, "holds", d.used, "bound", d.size)
		r.tell(s.claim, f, corev1.EventTypeWarning, ReasonNamespaceLimit, msgNamespaceLimit(s.class.Name, s.claim.Namespace, d.used, int(d.size)))
		return s.waitOnClass("an address of the namespace to be released", roomWait)
	case drawClassFull:
		logger.Info("the class is full; not asking MetalLB", "family", f, "used", d.used, "size", d.size)
		if r.tell(s.claim, f, corev1.EventTypeWarning, ReasonPoolExhausted, msgClassFull(f, s.class.Name, d.used, d.size)) {
			draw.AllocationsTotal.WithLabelValues(s.class.Name, string(f), draw.ResultPoolExhausted).Inc()
		}
		return s.waitOnClass("room in the class", roomWait)
	}
	logger.Info("an address of the ledger is not held in MetalLB right now; waiting", "family", f, "ipaddress", d.unsettled.Name)
	r.tell(s.claim, f, corev1.EventTypeNormal, ReasonWaitingForLedger, msgWaitingForLedger(f, s.class.Name, d.unsettled))
	return s.waitOnClass("every address of the ledger to be held in MetalLB", ledgerWait)
}

// classDraws reads, in memory and without copies, what takes a class's
// room in family f: the draws in flight the cache does not show (inflight),
// the cached placeholders whose address the ledger does not record yet
// (drawn) and the ledger (its view, through the ledger's indexes). They
// are read in that order, each before what a draw moves on to: one
// leaving the book is listed by then, one leaving the list recorded. The
// caller holds the class's lock.
func (r *Reconciler) classDraws(ctx context.Context, book *draw.Book, class string, f iadv1alpha1.IPFamily, now time.Time) (
	v draw.LedgerView, drawn, inflight int, err error) {
	inBook := book.Draws(now)
	phs, err := draw.DrawnPlaceholders(ctx, r.Client, r.PlaceholderNamespace, class)
	if err != nil {
		return draw.LedgerView{}, 0, 0, err
	}
	if v, err = r.ledger.View(ctx, class, f); err != nil {
		return draw.LedgerView{}, 0, 0, err
	}
	return v, draw.Unrecorded(phs, f, v.Records), draw.InFlight(inBook, f, phs, now), nil
}
