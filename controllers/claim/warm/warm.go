package warm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// warmWaitForMetalLB is the result of a family whose warm placeholders
// wait for MetalLB; their status changes bring the class back.
var warmWaitForMetalLB = phase.WaitFor("MetalLB to assign the warm placeholders an address", 0)

// checkIdle ends the pass of a class with nothing for the warm controller
// to do: it asks for no warm address, and no warm placeholder or address
// the driver labelled warm is left. The warm controller hears about every
// address and placeholder of the class; for a class without warm
// reservations (the default) this keeps each event from copying its ledger.
func (w *warmer) checkIdle(ctx context.Context, s *warmScope) (phase.Result, error) {
	if s.target > 0 {
		return phase.Next(), nil
	}
	phs, err := w.warmPlaceholders(ctx, s.name)
	if err != nil || len(phs) > 0 {
		return phase.Next(), err
	}
	var warm iadv1alpha1.IPAddressList
	if err := w.List(ctx, &warm, client.MatchingFields{index.WarmAddressByClass: s.name}, client.UnsafeDisableDeepCopy); err != nil {
		return phase.Next(), err
	}
	if len(warm.Items) > 0 {
		return phase.Next(), nil
	}
	return phase.Halt("no warm address is asked for or left", 0), nil
}

// readLedger scopes, under the class's lock, the class's addresses and
// warm placeholders (read).
func (w *warmer) readLedger(ctx context.Context, s *warmScope) (phase.Result, error) {
	book := w.shared.Draws.Of(s.name)
	book.Decide.Lock()
	defer book.Decide.Unlock()
	return phase.Next(), w.read(ctx, s)
}

// decideFills scopes, under the class's lock, what readLedger does, then
// plans each family's warm addresses (decideFill), entering the draws the
// pass will make in the class's book.
func (w *warmer) decideFills(ctx context.Context, s *warmScope) (phase.Result, error) {
	s.book = w.shared.Draws.Of(s.name)
	s.book.Decide.Lock()
	defer s.book.Decide.Unlock()
	if err := w.read(ctx, s); err != nil {
		return phase.Next(), err
	}
	for _, f := range warmFamilies {
		if err := w.decideFill(ctx, s, f); err != nil {
			return phase.Next(), err
		}
	}
	return phase.Next(), nil
}

// read reads the class's addresses and warm placeholders into the scope.
func (w *warmer) read(ctx context.Context, s *warmScope) error {
	var addrs iadv1alpha1.IPAddressList
	if err := w.List(ctx, &addrs, client.MatchingFields{index.AddressByClass: s.name}); err != nil {
		return err
	}
	phs, err := w.warmPlaceholders(ctx, s.name)
	if err != nil {
		return err
	}
	s.addrs, s.phs = addrs.Items, phs
	return nil
}

// decideFill plans family f's warm addresses (planWarm) and whether the
// missing ones may be drawn now (mayRefill), from the cache and the book,
// and enters those draws in the class's book. The caller holds the
// class's lock.
func (w *warmer) decideFill(ctx context.Context, s *warmScope, f iadv1alpha1.IPFamily) error {
	v4, v6 := classparams.FamilySizes(s.ranges)
	size, target := v4, s.target
	if f == iadv1alpha1.FamilyIPv6 {
		size = v6
	}
	if size == 0 && target > 0 {
		target = 0
	}
	if target < 0 {
		return nil // parameters that do not parse: change nothing
	}
	// Claims' placeholders take room too until their address is
	// recorded, and their draws in flight before the cache shows them
	// (the book is read first: a draw leaving it is listed by then).
	now := time.Now()
	inBook := s.book.Draws(now)
	drawn, err := draw.DrawnPlaceholders(ctx, w.Client, w.PlaceholderNamespace, s.name)
	if err != nil {
		return err
	}
	claims := slices.DeleteFunc(drawn, func(ph corev1.Service) bool {
		return ph.Labels[marks.LabelPlaceholder] != names.PlaceholderAllocation
	})
	taken := draw.Unrecorded(claims, f, draw.ViewOf(s.addrs, s.name, f).Records) + draw.InFlight(inBook, f, claims, now)
	fill := &warmFill{plan: planWarm(f, target, size-float64(taken), s.ranges, s.addrs, s.phs), target: target}
	if fill.plan.create > 0 {
		fill.heldBack = w.mayRefill(ctx, s, f, fill.plan.create)
	}
	if fill.heldBack == nil {
		for range fill.plan.create {
			name := fmt.Sprintf("warm:%s:%d", f, w.drawSeq.Add(1)) // no placeholder's name
			s.book.Reserve(name, f, now)
			fill.draws = append(fill.draws, name)
		}
	}
	s.fills[f] = fill
	return nil
}

// fill is the phase that carries out family f's plan (decideFills): record
// what MetalLB assigned, drop the surplus, then draw what is missing
// unless something holds the refill back. Each draw leaves the book once
// the cache shows its placeholder. It waits while warm placeholders of
// the family wait for MetalLB, or a record waits (warmDraw.report).
func (w *warmer) fill(f iadv1alpha1.IPFamily) phase.Phase[*warmScope] {
	return phase.Phase[*warmScope]{Name: "fill " + string(f), Run: func(ctx context.Context, s *warmScope) (phase.Result, error) {
		fill := s.fills[f]
		if fill == nil {
			return phase.Next(), nil
		}
		p, d := fill.plan, w.draw(s, f)
		waits, err := w.settleDraws(ctx, s, d, p)
		if err != nil {
			return phase.Next(), err
		}
		if p.full {
			w.Recorder.Event(s.class, corev1.EventTypeWarning, ReasonWarmPoolFull, msgWarmPoolFull(f, fill.target))
		}
		if p.create == 0 {
			return waits, nil
		}
		if fill.heldBack != nil {
			return *fill.heldBack, nil
		}
		// A record of this pass may have given an address back.
		if left := w.pauses.Left(warmKey(s.name, f), time.Now()); left > 0 {
			log.FromContext(ctx).V(1).Info("pausing after a give-back before warming again", "class", s.name, "family", f, "for", left)
			return phase.RetryAfter(left, "gave an address back a moment ago"), nil
		}
		for len(fill.draws) > 0 {
			res, err := d.CreatePlaceholder(ctx)
			s.book.Settle(fill.draws[0])
			fill.draws = fill.draws[1:]
			if err != nil {
				return phase.Next(), err
			}
			waits = phase.First(waits, res)
		}
		return waits, nil
	}}
}

// settleDraws records what MetalLB assigned the plan's placeholders and
// drops the plan's surplus. It returns what the family waits for: the
// first wait of a record, else MetalLB when the plan keeps placeholders
// waiting for it.
func (w *warmer) settleDraws(ctx context.Context, s *warmScope, d draw.Draw, p warmPlan) (phase.Result, error) {
	waits := phase.Next()
	for _, ph := range p.record {
		_, res, err := d.Record(ctx, ph)
		if err != nil {
			return phase.Next(), err
		}
		waits = phase.First(waits, res)
	}
	if p.waiting > 0 {
		waits = phase.First(waits, warmWaitForMetalLB)
	}
	return waits, w.dropSurplus(ctx, s, p)
}

// dropSurplus deletes the plan's surplus warm placeholders and addresses.
func (w *warmer) dropSurplus(ctx context.Context, s *warmScope, p warmPlan) error {
	for _, ph := range p.dropPlaceholders {
		if _, err := patch.Delete(ctx, w.Client, ph, true); err != nil {
			return fmt.Errorf("delete surplus warm placeholder %s: %w", ph.Name, err)
		}
	}
	for _, a := range p.dropAddresses {
		// The precondition makes sure the core has not bound it meanwhile.
		if _, err := patch.Delete(ctx, w.Client, a, true); err != nil {
			return fmt.Errorf("delete surplus warm address %s: %w", a.Name, err)
		}
		if classparams.InRanges(s.ranges, a.Spec.Address) {
			log.FromContext(ctx).Info("deleted surplus warm address", "ipaddress", a.Name, "class", s.name)
			continue
		}
		log.FromContext(ctx).Info("deleted a warm address outside the class's ranges", "ipaddress", a.Name, "class", s.name)
		w.Recorder.Event(s.class, corev1.EventTypeNormal, ReasonWarmDropped, msgWarmDropped(a))
	}
	return nil
}

// mayRefill returns nil when missing warm addresses of family f may be
// drawn now, else what the refill waits for.
func (w *warmer) mayRefill(ctx context.Context, s *warmScope, f iadv1alpha1.IPFamily, missing int) *phase.Result {
	logger := log.FromContext(ctx).V(1)
	// While an address of the ledger is unheld in MetalLB, MetalLB would
	// hand it to a new warm placeholder, only for it to be given back; an
	// IPAddress or placeholder change brings the class back.
	if a := draw.UnsettledAddress(draw.ViewOf(s.addrs, s.name, f).Unheld, w.shared.Holds.HeldBy); a != nil {
		logger.Info("an address of the ledger is not held in MetalLB right now; not warming yet",
			"class", s.name, "family", f, "ipaddress", a.Name)
		return ptr.To(phase.WaitFor("every address of the ledger to be held in MetalLB", 0))
	}
	if left := w.pauses.Left(warmKey(s.name, f), time.Now()); left > 0 {
		logger.Info("pausing after a give-back before warming again", "class", s.name, "family", f, "for", left)
		return ptr.To(phase.RetryAfter(left, "gave an address back a moment ago"))
	}
	// Claims may still be taking warm addresses: let the burst be bound first.
	if left := w.refills.Wait(warmKey(s.name, f), missing, time.Now()); left > 0 {
		logger.Info("warm addresses were taken a moment ago; refilling once the burst has passed",
			"class", s.name, "family", f, "missing", missing, "in", left)
		return ptr.To(phase.RetryAfter(left, "warm addresses were taken a moment ago"))
	}
	return nil
}

// dropOrphans deletes what the warm controller made for a class it no
// longer serves (gone, not ours, or being deleted): the warm placeholders
// still waiting for MetalLB, and the warm addresses, which no claim can be
// bound to any more and for which the class controller keeps the pool. The
// preconditions keep an address the core bound a moment ago.
func (w *warmer) dropOrphans(ctx context.Context, s *warmScope) (phase.Result, error) {
	var errs []error
	for _, ph := range s.phs {
		if ph.Labels[marks.LabelPlaceholder] != names.PlaceholderWarm || ph.Labels[marks.LabelAddress] != "" {
			continue
		}
		if _, err := patch.Delete(ctx, w.Client, ph, true); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range s.addrs {
		a := &s.addrs[i]
		if !isWarm(a) || a.Labels[marks.LabelWarm] != "true" {
			continue
		}
		switch deleted, err := patch.Delete(ctx, w.Client, a, true); {
		case err != nil:
			errs = append(errs, err)
		case deleted:
			log.FromContext(ctx).Info("deleted a warm address of a class that is gone", "address", a.Name)
		}
	}
	return phase.Next(), errors.Join(errs...)
}
