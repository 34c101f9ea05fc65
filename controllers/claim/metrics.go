package claim

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of an allocation attempt, the values of the "result" label of
// metallb_iad_claim_allocations_total.
const (
	resultRecorded       = "recorded"
	resultPoolExhausted  = "pool_exhausted"
	resultLedgerMismatch = "ledger_mismatch"
	resultWarm           = "warm"
)

var (
	allocationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metallb_iad_claim_allocations_total",
		Help: "Allocation outcomes observed by the claim controller, by class, family and result " +
			"(recorded: an IPAddress was recorded for a claim; warm: an Available IPAddress was recorded as a warm reservation; pool_exhausted: MetalLB had no free address; " +
			"ledger_mismatch: MetalLB assigned an address the ledger gives to someone else).",
	}, []string{"class", "family", "result"})

	claimsPending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metallb_iad_claim_pending",
		Help: "Claims served by this driver that still miss an address, by class.",
	}, []string{"class"})
)

func init() {
	metrics.Registry.MustRegister(allocationsTotal, claimsPending)
}

// pendingClaims tracks which claims still miss an address, to keep the
// metallb_iad_claim_pending gauge exact as claims come and go.
type pendingClaims struct {
	mu      sync.Mutex
	classOf map[types.NamespacedName]string
	count   map[string]int
}

// set records whether the claim is pending, and under which class.
func (p *pendingClaims) set(claim types.NamespacedName, class string, pending bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.classOf == nil {
		p.classOf = map[types.NamespacedName]string{}
		p.count = map[string]int{}
	}
	if old, ok := p.classOf[claim]; ok {
		if pending && old == class {
			return
		}
		delete(p.classOf, claim)
		p.count[old]--
		claimsPending.WithLabelValues(old).Set(float64(p.count[old]))
	}
	if pending {
		p.classOf[claim] = class
		p.count[class]++
		claimsPending.WithLabelValues(class).Set(float64(p.count[class]))
	}
}

// forget drops a claim that is gone or no longer served.
func (p *pendingClaims) forget(claim types.NamespacedName) { p.set(claim, "", false) }

// blockedClaims remembers which claims wait because their class is full,
// by class, so that freeing an address of the class brings exactly them
// back. It only decides what to look at again, never what to do.
type blockedClaims struct {
	mu      sync.Mutex
	classOf map[types.NamespacedName]string
}

// set records whether the claim waits for room in class.
func (b *blockedClaims) set(claim types.NamespacedName, class string, blocked bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.classOf == nil {
		b.classOf = map[types.NamespacedName]string{}
	}
	if blocked {
		b.classOf[claim] = class
	} else {
		delete(b.classOf, claim)
	}
}

// of lists the claims waiting for room in class.
func (b *blockedClaims) of(class string) []types.NamespacedName {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []types.NamespacedName
	for k, c := range b.classOf {
		if c == class {
			out = append(out, k)
		}
	}
	return out
}
