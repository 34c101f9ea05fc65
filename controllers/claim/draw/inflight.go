package draw

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// Draws in flight. MetalLB does not retry an allocation it could not make,
// so a claim asks for an address only while the class has room for it:
// its ledger, the placeholders the cache shows drawing from it and not
// recorded yet (unrecorded), and the draws decided whose placeholder the
// cache does not show yet. The last are the book below, kept in memory:
// a pass decides and enters its draw in the book under the class's lock,
// which it holds for nothing else, then creates the placeholder outside
// it; the draw leaves the book at the placeholder's first watch event, when
// the cache counts it. So draws of one class overlap, and none decides
// from a cache that misses another's.
//
// The book only holds back: losing it at a restart loses nothing a fresh
// cache does not show, and a draw it keeps too long (a create whose watch
// event never came) leaves after InflightMax.

// InflightMax bounds how long a draw stays in the book without the cache
// showing its placeholder: as long as a pass waits for the cache.
const InflightMax = CacheWait

// Book is one class's decision lock and book of draws in flight.
type Book struct {
	// Decide is held while a pass decides a draw (claims) or across a
	// warm pass.
	Decide sync.Mutex

	mu       sync.Mutex // guards book; never held across a call out
	inflight map[string]InFlightDraw
}

// InFlightDraw is a draw decided, by its placeholder's name.
type InFlightDraw struct {
	F     iadv1alpha1.IPFamily
	Since time.Time
	// Claim is the claim drawing ("" for a warm draw).
	Claim types.NamespacedName
}

// Reserve enters the draw of placeholder name in the book, and returns how
// many of the class's draws are in flight with it.
func (c *Book) Reserve(name string, f iadv1alpha1.IPFamily, now time.Time) int {
	return c.ReserveFor(name, types.NamespacedName{}, f, now)
}

// ReserveFor is reserve for a claim's draw.
func (c *Book) ReserveFor(name string, claim types.NamespacedName, f iadv1alpha1.IPFamily, now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight == nil {
		c.inflight = map[string]InFlightDraw{}
	}
	c.inflight[name] = InFlightDraw{F: f, Since: now, Claim: claim}
	return len(c.inflight)
}

// Settle takes a draw out of the book: the cache shows its placeholder, or
// its create failed.
func (c *Book) Settle(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.inflight, name)
}

// InBook reports whether the draw of placeholder name is in flight.
func (c *Book) InBook(name string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.inflight[name]
	return ok && now.Sub(d.Since) < InflightMax
}

// Draws copies the draws in flight, forgetting those older than InflightMax.
func (c *Book) Draws(now time.Time) map[string]InFlightDraw {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]InFlightDraw, len(c.inflight))
	for name, d := range c.inflight {
		if now.Sub(d.Since) >= InflightMax {
			delete(c.inflight, name)
			continue
		}
		out[name] = d
	}
	return out
}

// InFlight counts the draws of family f in book that take room the cached
// draws (the class's placeholders listed in the cache, drawn) do not show:
// not listed there, and younger than InflightMax. The book must be read
// before drawn, so that a draw leaving the book has reached the list.
func InFlight(book map[string]InFlightDraw, f iadv1alpha1.IPFamily, drawn []corev1.Service, now time.Time) int {
	if len(book) == 0 {
		return 0
	}
	listed := make(map[string]bool, len(drawn))
	for i := range drawn {
		listed[drawn[i].Name] = true
	}
	n := 0
	for name, d := range book {
		if d.F == f && !listed[name] && now.Sub(d.Since) < InflightMax {
			n++
		}
	}
	return n
}

// GiveBackPause is how long a claim waits after a give-back before it
// draws again, doubling up to MaxGiveBackPause while MetalLB keeps
// assigning the same address. The address is often a Service's in a gap
// handoff; a placeholder created again at once (same name, new uid) races
// that Service in the very pass the deletion starts, and MetalLB, whose
// cache still shows the old placeholder, fails its status update and backs
// off every pending Service in the cluster.
const (
	GiveBackPause    = 2 * time.Second
	MaxGiveBackPause = time.Minute
)

// Pauses remembers, per draw owner and family, the pause after a
// give-back. It only delays: a restart that loses it draws at once.
type Pauses struct {
	mu sync.Mutex
	m  map[string]drawPause
}

type drawPause struct {
	ip    string
	times int
	until time.Time
}

// HoldUntil makes every pause on record last until then: for a test that
// needs a draw to stay paused while it looks.
func (p *Pauses) HoldUntil(until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, e := range p.m {
		e.until = until
		p.m[key] = e
	}
}

// GaveBack records that key gave back ip at now, and returns the pause:
// GiveBackPause, doubled for each time in a row the same address came back.
func (p *Pauses) GaveBack(key, ip string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]drawPause{}
	}
	for k, e := range p.m {
		if now.Sub(e.until) > MaxGiveBackPause {
			delete(p.m, k) // long over: forget it
		}
	}
	e := p.m[key]
	if e.ip != ip || now.Sub(e.until) > MaxGiveBackPause {
		e = drawPause{ip: ip}
	}
	e.times++
	d := GiveBackPause
	for i := 1; i < e.times && d < MaxGiveBackPause; i++ {
		d *= 2
	}
	d = min(d, MaxGiveBackPause)
	e.until = now.Add(d)
	p.m[key] = e
	return d
}

func (p *Pauses) Left(key string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.m[key]; ok && now.Before(e.until) {
		return e.until.Sub(now)
	}
	return 0
}

func (p *Pauses) Forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, key)
}

// refillQuiet is how long a class's warm addresses must stay untaken
// before they are refilled, refillMax how long a refill waits at most: a
// refill started at a burst's first binding competes with the rest of the
// burst for the API server and MetalLB's queue.
const (
	refillQuiet = 300 * time.Millisecond
	refillMax   = 2 * time.Second
)

// RefillDelays remembers, per class and family, since when addresses are
// missing and when the shortfall last grew. It only delays, as Pauses.
type RefillDelays struct {
	mu sync.Mutex
	m  map[string]shortfall
}

type shortfall struct {
	n           int
	since, grew time.Time
}

// Wait records that key lacks n warm addresses at now and returns how long
// its refill still waits: refillQuiet after the shortfall last grew, at
// most refillMax after it was first seen. Then the shortfall is forgotten.
func (r *RefillDelays) Wait(key string, n int, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]shortfall{}
	}
	s, seen := r.m[key]
	switch {
	case !seen:
		s = shortfall{n: n, since: now, grew: now}
	case n > s.n:
		s.n, s.grew = n, now
	default:
		s.n = n
	}
	left := min(s.grew.Add(refillQuiet).Sub(now), s.since.Add(refillMax).Sub(now))
	if left <= 0 {
		delete(r.m, key)
		return 0
	}
	r.m[key] = s
	return left
}
