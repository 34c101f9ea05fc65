package claim

import "sync"

// claimWorkers is how many claims the claim controller reconciles at once
// (unless its Options say otherwise). Each claim takes two passes (draw,
// then record), and every pass waits on the API server; with one worker a
// claim's recording waited behind other claims' draws. The gain measured
// at N = 1,000 was small (BENCHMARKS.md): MetalLB's pace bounds a burst.
const claimWorkers = 4

// drawLocks serializes, per class, what decides that MetalLB can give the
// class another address and the creation of the placeholder that asks for
// it: a claim pass (createPlaceholder) and a warm pass hold the class's
// lock from reading the ledger until the cache shows the placeholder they
// created, so no pass decides from a cache that misses another's draw, and
// MetalLB is never asked for an address the class's ranges cannot give.
// Recording an address MetalLB gave (the second step) needs no lock.
type drawLocks struct {
	mu sync.Mutex
	m  map[string]*sync.Mutex
}

// lock takes the class's lock and returns its release.
func (l *drawLocks) lock(class string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*sync.Mutex{}
	}
	m, ok := l.m[class]
	if !ok {
		m = &sync.Mutex{}
		l.m[class] = m
	}
	l.mu.Unlock()
	m.Lock()
	return m.Unlock
}
