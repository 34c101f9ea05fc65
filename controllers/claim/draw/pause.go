package draw

import (
	"sync"
	"time"
)

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
