package claim

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/metallb-iad/internal/phase"
)

// track records, at the end of a pass, whether the claim still misses an
// address (the pending gauge) and whether it waits on its class's ledger,
// so that the address watch wakes it (addressToClaims).
func (r *Reconciler) track(_ context.Context, s *scope) (phase.Result, error) {
	r.pending.set(s.key, s.class.Name, s.pending())
	r.blocked.set(s.key, s.class.Name, s.pending() && s.blocked)
	return phase.Next(), nil
}

// forget drops a claim that is gone or no longer served.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.pending.forget(key)
	r.blocked.forget(key)
}

// claimSet records claims under their class: the pending ones (for the
// gauge, pendingClaims) and the ones blocked on their class's ledger.
type claimSet struct {
	mu      sync.Mutex
	classOf map[types.NamespacedName]string
	count   map[string]int
}

// update records whether claim is in the set, and under which class;
// counted, if set, hears each changed class's count.
func (p *claimSet) update(claim types.NamespacedName, class string, in bool, counted func(class string, n int)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.classOf == nil {
		p.classOf = map[types.NamespacedName]string{}
		p.count = map[string]int{}
	}
	report := func(class string) {
		if counted != nil {
			counted(class, p.count[class])
		}
	}
	if old, ok := p.classOf[claim]; ok {
		if in && old == class {
			return
		}
		delete(p.classOf, claim)
		p.count[old]--
		report(old)
	}
	if in {
		p.classOf[claim] = class
		p.count[class]++
		report(class)
	}
}

func (p *claimSet) set(claim types.NamespacedName, class string, in bool) {
	p.update(claim, class, in, nil)
}

func (p *claimSet) forget(claim types.NamespacedName) { p.set(claim, "", false) }

// of lists the claims recorded under class.
func (p *claimSet) of(class string) []types.NamespacedName {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []types.NamespacedName
	for c, cl := range p.classOf {
		if cl == class {
			out = append(out, c)
		}
	}
	return out
}
