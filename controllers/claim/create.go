package claim

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/placeholder"
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

// createPlaceholder is the first step of a claim's draw: it decides, under
// the class's lock and from memory only (decide), whether MetalLB may be
// asked for an address now, entering the draw in the class's book of draws
// in flight; then, the lock let go, it tells the claim why it waits or
// creates the placeholder. Draws of one class overlap: the book, not the
// lock, keeps each from missing the others.
func (r *Reconciler) createPlaceholder(ctx context.Context, s *scope, f iadv1alpha1.IPFamily) (phase.Result, error) {
	if d := r.pauses.Left(memoKey(s.claim, f), time.Now()); d > 0 {
		log.FromContext(ctx).V(1).Info("gave an address back a moment ago; drawing again after a pause", "family", f, "pause", d)
		return phase.RetryAfter(d, "gave an address back a moment ago"), nil
	}
	name := placeholder.AllocationName(s.claim.UID, string(f))
	book := r.draws.Of(s.class.Name)
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
	d = decideDraw(s.class, f, v, drawn, inflight, r.holds.HeldBy)
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
