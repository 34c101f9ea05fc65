package claim

import (
	"sync"
	"time"
)

// giveBackPause is how long a claim waits, after giving back an address
// MetalLB assigned its allocation placeholder, before it creates the
// placeholder again; maxGiveBackPause bounds it as it doubles while MetalLB
// keeps assigning the same address.
//
// The address given back is one the ledger records for someone else, often
// a Service in a gap handoff whose hold was released a moment ago: MetalLB
// gives the freed address to whichever of the two it processes first. A
// placeholder created again at once (its name is the same, its uid is not)
// races that Service in the very pass the deletion starts, and MetalLB,
// whose cache still shows the old placeholder, fails its status update on
// the new one and backs off every pending Service in the cluster. The
// pause lets the pass run without the claim; a Service that stays blocked
// for another reason costs one draw per pause, not one per second.
const (
	giveBackPause    = 2 * time.Second
	maxGiveBackPause = time.Minute
)

// drawPauses remembers, per claim and family, when the claim gave back an
// address, and until when it waits before it draws again. It is a pause,
// not a decision: what a pass does is still derived from the cluster, and a
// restart that loses it only makes the claim draw at once.
type drawPauses struct {
	mu sync.Mutex
	m  map[string]drawPause
}

type drawPause struct {
	ip    string
	times int
	until time.Time
}

// gaveBack records that key gave back ip at now, and returns the pause:
// giveBackPause, doubled for each time in a row the same address came back.
func (p *drawPauses) gaveBack(key, ip string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]drawPause{}
	}
	for k, e := range p.m {
		if now.Sub(e.until) > maxGiveBackPause {
			delete(p.m, k) // long over: forget it
		}
	}
	e := p.m[key]
	if e.ip != ip || now.Sub(e.until) > maxGiveBackPause {
		e = drawPause{ip: ip}
	}
	e.times++
	d := giveBackPause
	for i := 1; i < e.times && d < maxGiveBackPause; i++ {
		d *= 2
	}
	d = min(d, maxGiveBackPause)
	e.until = now.Add(d)
	p.m[key] = e
	return d
}

// left returns how much of key's pause is left at now (0 if none).
func (p *drawPauses) left(key string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.m[key]; ok && now.Before(e.until) {
		return e.until.Sub(now)
	}
	return 0
}

// forget drops key's pauses: the family was recorded.
func (p *drawPauses) forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, key)
}

// refillQuiet is how long a class's warm addresses must stay untaken before
// the warm controller refills them, and refillMax how long a refill waits
// at most. A burst of claims is bound to warm addresses by the core; a
// refill started at the first binding competes with the rest of the burst
// for the API server (and MetalLB's queue), and the burst is what the warm
// addresses are for. Waiting until the burst has passed, or at most
// refillMax, hands the refill the same work a moment later.
const (
	refillQuiet = 300 * time.Millisecond
	refillMax   = 2 * time.Second
)

// refillDelays remembers, per class and family, since when the warm
// controller has seen addresses missing and when the shortfall last grew.
// Like drawPauses it only delays: a restart that loses it refills at once.
type refillDelays struct {
	mu sync.Mutex
	m  map[string]shortfall
}

type shortfall struct {
	n           int
	since, grew time.Time
}

// wait records that key lacks n warm addresses at now and returns how long
// its refill should still wait: until refillQuiet after the shortfall last
// grew, and no longer than refillMax after it was first seen. When nothing
// is left to wait the shortfall is forgotten, so the next one starts anew.
func (r *refillDelays) wait(key string, n int, now time.Time) time.Duration {
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
