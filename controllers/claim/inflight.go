package claim

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
// event never came) leaves after inflightMax.

// inflightMax bounds how long a draw stays in the book without the cache
// showing its placeholder: as long as a pass waits for the cache.
const inflightMax = cacheWait

// classBook is one class's decision lock and book of draws in flight.
type classBook struct {
	// decide is held while a pass decides a draw (claims) or across a
	// warm pass.
	decide sync.Mutex

	mu       sync.Mutex // guards book; never held across a call out
	inflight map[string]inflightDraw
}

// inflightDraw is a draw decided, by its placeholder's name.
type inflightDraw struct {
	f     iadv1alpha1.IPFamily
	since time.Time
	// claim is the claim drawing ("" for a warm draw).
	claim types.NamespacedName
}

// reserve enters the draw of placeholder name in the book, and returns how
// many of the class's draws are in flight with it.
func (c *classBook) reserve(name string, f iadv1alpha1.IPFamily, now time.Time) int {
	return c.reserveFor(name, types.NamespacedName{}, f, now)
}

// reserveFor is reserve for a claim's draw.
func (c *classBook) reserveFor(name string, claim types.NamespacedName, f iadv1alpha1.IPFamily, now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight == nil {
		c.inflight = map[string]inflightDraw{}
	}
	c.inflight[name] = inflightDraw{f: f, since: now, claim: claim}
	return len(c.inflight)
}

// settle takes a draw out of the book: the cache shows its placeholder, or
// its create failed.
func (c *classBook) settle(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.inflight, name)
}

// inBook reports whether the draw of placeholder name is in flight.
func (c *classBook) inBook(name string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.inflight[name]
	return ok && now.Sub(d.since) < inflightMax
}

// book copies the draws in flight, forgetting those older than inflightMax.
func (c *classBook) book(now time.Time) map[string]inflightDraw {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]inflightDraw, len(c.inflight))
	for name, d := range c.inflight {
		if now.Sub(d.since) >= inflightMax {
			delete(c.inflight, name)
			continue
		}
		out[name] = d
	}
	return out
}

// inFlight counts the draws of family f in book that take room the cached
// draws (the class's placeholders listed in the cache, drawn) do not show:
// not listed there, and younger than inflightMax. The book must be read
// before drawn, so that a draw leaving the book has reached the list.
func inFlight(book map[string]inflightDraw, f iadv1alpha1.IPFamily, drawn []corev1.Service, now time.Time) int {
	if len(book) == 0 {
		return 0
	}
	listed := make(map[string]bool, len(drawn))
	for i := range drawn {
		listed[drawn[i].Name] = true
	}
	n := 0
	for name, d := range book {
		if d.f == f && !listed[name] && now.Sub(d.since) < inflightMax {
			n++
		}
	}
	return n
}
