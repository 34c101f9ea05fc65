package claim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// dropOrphans deletes what the warm controller made for a class it no
// longer serves (gone, not ours, or being deleted): the warm placeholders
// still waiting for MetalLB, and the warm addresses, which no claim can be
// bound to any more and for which the class controller keeps the pool. The
// preconditions keep an address the core bound a moment ago.
func (w *warmer) dropOrphans(ctx context.Context, s *warmScope) (phase.Result, error) {
	var errs []error
	for _, ph := range s.phs {
		if ph.Labels[names.LabelPlaceholder] != names.PlaceholderWarm || ph.Labels[names.LabelAddress] != "" {
			continue
		}
		if _, err := patch.Delete(ctx, w.Client, ph, true); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range s.addrs {
		a := &s.addrs[i]
		if !isWarm(a) || a.Labels[names.LabelWarm] != "true" {
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

// decideFills plans each family's warm addresses (planWarm) and whether
// the missing ones may be drawn now (mayRefill), from the cache and the
// book, and enters those draws in the class's book. The caller holds the
// class's lock.
func (w *warmer) decideFills(ctx context.Context, s *warmScope, book *classBook) error {
	v4, v6 := classparams.FamilySizes(s.ranges)
	for _, f := range []iadv1alpha1.IPFamily{iadv1alpha1.FamilyIPv4, iadv1alpha1.FamilyIPv6} {
		size, target := v4, s.target
		if f == iadv1alpha1.FamilyIPv6 {
			size = v6
		}
		if size == 0 && target > 0 {
			target = 0
		}
		if target < 0 {
			continue // parameters that do not parse: change nothing
		}
		// Claims' placeholders take room too until their address is
		// recorded, and their draws in flight before the cache shows them
		// (the book is read first: a draw leaving it is listed by then).
		now := time.Now()
		inBook := book.book(now)
		drawn, err := drawnPlaceholders(ctx, w.Client, w.PlaceholderNamespace, s.name)
		if err != nil {
			return err
		}
		claims := slices.DeleteFunc(drawn, func(ph corev1.Service) bool {
			return ph.Labels[names.LabelPlaceholder] != names.PlaceholderAllocation
		})
		taken := unrecorded(claims, f, s.addrs) + inFlight(inBook, f, claims, now)
		fill := &warmFill{plan: planWarm(f, target, size-float64(taken), s.ranges, s.addrs, s.phs), target: target, refill: phase.Next()}
		if fill.plan.create > 0 {
			fill.refill = w.mayRefill(ctx, s, f, fill.plan.create)
		}
		if fill.refill.State == phase.Done {
			for range fill.plan.create {
				name := fmt.Sprintf("warm:%s:%d", f, w.drawSeq.Add(1)) // no placeholder's name
				book.reserve(name, f, now)
				fill.draws = append(fill.draws, name)
			}
		}
		s.fills[f] = fill
	}
	return nil
}

// fill is the phase that carries out family f's plan (decideFills): record
// what MetalLB assigned, drop the surplus, then draw what is missing
// unless something holds the refill back. Each draw leaves the book once
// the cache shows its placeholder.
func (w *warmer) fill(f iadv1alpha1.IPFamily) func(context.Context, *warmScope) (phase.Result, error) {
	return func(ctx context.Context, s *warmScope) (phase.Result, error) {
		fill := s.fills[f]
		if fill == nil {
			return phase.Next(), nil
		}
		p, d := fill.plan, w.draw(s, f)
		for _, ph := range p.record {
			if _, _, err := d.record(ctx, ph); err != nil {
				return phase.Next(), err
			}
		}
		if err := w.dropSurplus(ctx, s, p); err != nil {
			return phase.Next(), err
		}
		if p.full {
			w.Recorder.Event(s.class, corev1.EventTypeWarning, ReasonWarmPoolFull, msgWarmPoolFull(f, fill.target))
		}
		if p.create == 0 {
			return phase.Next(), nil
		}
		if fill.refill.State != phase.Done {
			return fill.refill, nil
		}
		// A record of this pass may have given an address back.
		if left := w.pauses.left(warmKey(s.name, f), time.Now()); left > 0 {
			log.FromContext(ctx).V(1).Info("pausing after a give-back before warming again", "class", s.name, "family", f, "for", left)
			return phase.RetryAfter(left, "gave an address back a moment ago"), nil
		}
		book := w.draws.of(s.name)
		for len(fill.draws) > 0 {
			_, err := d.create(ctx)
			book.settle(fill.draws[0])
			fill.draws = fill.draws[1:]
			if err != nil {
				return phase.Next(), err
			}
		}
		return phase.Next(), nil
	}
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
		if inRanges(s.ranges, a.Spec.Address) {
			log.FromContext(ctx).Info("deleted surplus warm address", "ipaddress", a.Name, "class", s.name)
			continue
		}
		log.FromContext(ctx).Info("deleted a warm address outside the class's ranges", "ipaddress", a.Name, "class", s.name)
		w.Recorder.Event(s.class, corev1.EventTypeNormal, ReasonWarmDropped, msgWarmDropped(a))
	}
	return nil
}

// mayRefill returns Next when missing warm addresses of family f may be
// drawn now, else what the refill waits for.
func (w *warmer) mayRefill(ctx context.Context, s *warmScope, f iadv1alpha1.IPFamily, missing int) phase.Result {
	logger := log.FromContext(ctx).V(1)
	// While an address of the ledger is unheld in MetalLB, MetalLB would
	// hand it to a new warm placeholder, only for it to be given back; an
	// IPAddress or placeholder change brings the class back.
	if a := unsettledAddress(s.addrs, f, heldByPlaceholder(ctx, w.Client, w.PlaceholderNamespace)); a != nil {
		logger.Info("an address of the ledger is not held in MetalLB right now; not warming yet",
			"class", s.name, "family", f, "ipaddress", a.Name)
		return phase.WaitFor("an address of the ledger is not held in MetalLB", 0)
	}
	if left := w.pauses.left(warmKey(s.name, f), time.Now()); left > 0 {
		logger.Info("pausing after a give-back before warming again", "class", s.name, "family", f, "for", left)
		return phase.RetryAfter(left, "gave an address back a moment ago")
	}
	// Claims may still be taking warm addresses: let the burst be bound first.
	if left := w.refills.wait(warmKey(s.name, f), missing, time.Now()); left > 0 {
		logger.Info("warm addresses were taken a moment ago; refilling once the burst has passed",
			"class", s.name, "family", f, "missing", missing, "in", left)
		return phase.RetryAfter(left, "warm addresses were taken a moment ago")
	}
	return phase.Next()
}

// clearRefused is the phase that looks for stale allocations of the
// class's free addresses in MetalLB (staleClearer) when MetalLB refused a
// warm placeholder of family f for lack of room.
func (w *warmer) clearRefused(f iadv1alpha1.IPFamily) func(context.Context, *warmScope) (phase.Result, error) {
	return func(ctx context.Context, s *warmScope) (phase.Result, error) {
		d := w.draw(s, f)
		var since time.Time
		var refused []*corev1.Service
		for _, ph := range s.phs {
			if ph.Annotations[names.AnnotationFamily] != string(f) || ph.DeletionTimestamp != nil || assignedIP(ph, f) != "" {
				continue
			}
			failure, err := d.refusal(ctx, ph)
			if err != nil {
				return phase.Next(), err
			}
			if failure == nil || stale.UnknownPool(failure.Message) {
				continue
			}
			refused = append(refused, ph)
			if t := stale.EventFirstTime(failure); since.IsZero() || t.Before(since) {
				since = t
			}
		}
		if since.IsZero() {
			return phase.Next(), nil
		}
		now := time.Now()
		inBook := w.draws.of(s.name).book(now)
		drawn, err := drawnPlaceholders(ctx, w.Client, w.PlaceholderNamespace, s.name)
		if err != nil {
			return phase.Next(), err
		}
		taken := unrecorded(drawn, f, s.addrs) + inFlight(inBook, f, drawn, now)
		wait, err := (&staleClearer{Deps: w.Deps, cleared: w.cleared}).clearFree(ctx, s.class, f, s.addrs, taken, since, refused)
		if wait > 0 {
			return phase.RetryAfter(wait, "MetalLB refuses warm placeholders while the ledger shows room"), err
		}
		return phase.Next(), err
	}
}
