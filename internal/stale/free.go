package stale

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/names"
)

// Wait is how long a refusal lasts before MetalLB's books are looked
// at, and how often again: MetalLB may not have processed a deletion of a
// moment ago yet.
const Wait = 10 * time.Second

// maxClears bounds the Services one pass creates and deletes.
const maxClears = 16

// Forget is how long the memory of a clear is kept: longer than
// MetalLB's Events live (an hour by default).
const Forget = 2 * time.Hour

// RetryMax caps the wait before the same assignment is cleared again.
const RetryMax = 10 * time.Minute

// Clearer clears stale allocations of a class's free addresses; its
// APIReader reads Events the cache does not hold.
type Clearer struct {
	bootstrap.Deps
	Cleared *Memo
}

// Memo remembers, per Service name cleared, the assignment it was
// cleared for and how often: a clear MetalLB ignored (its first pass after
// a start still failing) is made again after twice the wait before, up to
// RetryMax.
type Memo struct {
	mu sync.Mutex
	at map[types.NamespacedName]staleClear
	// last is, per class, when a clear last created and deleted a Service.
	last map[string]time.Time
}

func (m *Memo) lastClear(class string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last[class]
}

func (m *Memo) made(class string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[string]time.Time{}
	}
	for c, at := range m.last {
		if now.Sub(at) >= Forget {
			delete(m.last, c)
		}
	}
	m.last[class] = now
}

// staleClear is the clears of one name.
type staleClear struct {
	assigned, Cleared time.Time
	times             int
}

func (c staleClear) retryAfter() time.Duration {
	wait := Wait
	for i := 1; i < c.times && wait < RetryMax; i++ {
		wait *= 2
	}
	return min(wait, RetryMax)
}

// due reports whether key is to be cleared now for an assignment at
// assigned (a later one, or the same once its retry wait is over), and
// records the clear; if not, how long until it is.
func (m *Memo) due(key types.NamespacedName, assigned, now time.Time) (bool, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, c := range m.at {
		if now.Sub(c.Cleared) >= Forget {
			delete(m.at, k)
		}
	}
	c, ok := m.at[key]
	switch {
	case !ok || assigned.After(c.assigned):
		c = staleClear{assigned: assigned}
	case now.Sub(c.Cleared) < c.retryAfter():
		return false, c.retryAfter() - now.Sub(c.Cleared)
	}
	if m.at == nil {
		m.at = map[types.NamespacedName]staleClear{}
	}
	c.Cleared, c.times = now, c.times+1
	m.at[key] = c
	return true, 0
}

// ClearFree runs when MetalLB refused placeholders of family f for lack of
// room since refusedSince: unless the caller found the class full (the
// ledger and the draws but the refused one leave no room), it
// clears stale allocations of free addresses, then pokes the refused
// placeholders (MetalLB does not retry them by itself). It returns when to
// look again while the refusal may last.
func (c *Clearer) ClearFree(ctx context.Context, class *iadv1alpha1.IPAddressClass, f iadv1alpha1.IPFamily,
	addrs []iadv1alpha1.IPAddress, full bool, refusedSince time.Time, refused []*corev1.Service) (time.Duration, error) {
	if wait := refusalWait(refused, refusedSince, time.Now()); wait > 0 {
		return wait, nil
	}
	if full {
		return 0, nil // MetalLB is right: the class is full
	}
	p, err := classparams.ParseParameters(class.Spec.Parameters)
	if err != nil {
		return 0, nil
	}
	cleared, next, err := c.clearHolders(ctx, class, f, p.Addresses, addrs)
	if err != nil {
		return 0, err
	}
	poke := refused
	if cleared == 0 {
		// A clear made since a placeholder was refused or poked did not
		// make MetalLB look at it again: poke those. Else look again when
		// the next clear is due.
		poke = clearedSince(refused, refusedSince, c.Cleared.lastClear(class.Name))
		if len(poke) == 0 {
			return next, nil
		}
	}
	for _, ph := range poke {
		if err := Poke(ctx, c, ph); err != nil {
			return 0, err
		}
	}
	return Wait, nil
}

// clearHolders clears the due stale allocations of free addresses that
// MetalLB's Events in every namespace show (the holder may be a tenant's
// Service the address was attached to). It returns how many it cleared and
// when the next one is due.
func (c *Clearer) clearHolders(ctx context.Context, class *iadv1alpha1.IPAddressClass, f iadv1alpha1.IPFamily,
	ranges []classparams.AddressRange, addrs []iadv1alpha1.IPAddress) (int, time.Duration, error) {
	ledger := map[string]bool{}
	for i := range addrs {
		if a, err := names.ParseAddress(addrs[i].Spec.Address); err == nil {
			ledger[a.String()] = true
		}
	}
	var evs corev1.EventList
	if err := c.APIReader.List(ctx, &evs, client.MatchingFields{"reason": ReasonIPAllocated}); err != nil {
		return 0, 0, err
	}
	cleared := 0
	var next time.Duration
	for key, as := range freeHolders(evs.Items, f, ranges, ledger) {
		if cleared == maxClears {
			break
		}
		if due, after := c.Cleared.due(key, as.At, time.Now()); !due {
			if next == 0 || after < next {
				next = after
			}
			continue
		}
		ok, err := Clear(ctx, c, c.APIReader, key, "free address "+as.IP)
		if err != nil {
			return 0, 0, err
		}
		if ok {
			cleared++
			c.Cleared.made(class.Name, time.Now())
			log.FromContext(ctx).Info("cleared a stale MetalLB allocation of a free address", "class", class.Name, "service", key, "ip", as.IP)
			c.Recorder.Event(class, corev1.EventTypeNormal, ReasonCleared, msgFreeCleared(as.IP, key))
		}
	}
	return cleared, next, nil
}
