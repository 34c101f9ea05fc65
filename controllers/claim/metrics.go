package claim

import (
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
	resultReturned       = "returned"
)

var (
	allocationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metallb_iad_claim_allocations_total",
		Help: "Allocation outcomes observed by the claim controller, by class, family and result " +
			"(recorded: an IPAddress was recorded for a claim; warm: an Available IPAddress was recorded as a warm reservation; pool_exhausted: MetalLB had no free address; " +
			"ledger_mismatch: the IPAddress name of an assigned address is taken by another entry; " +
			"returned: MetalLB assigned an address the ledger records for someone else, and the driver gave it back).",
	}, []string{"class", "family", "result"})

	drawsInFlight = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "metallb_iad_claim_draws_in_flight",
		Help: "Draws of a class in flight when a claim's draw is decided, that one included: placeholders decided on " +
			"and not yet shown by the controller's cache. Above 1, draws of one class overlap.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
	}, []string{"class"})

	claimsPending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metallb_iad_claim_pending",
		Help: "Claims served by this driver that still miss an address, by class.",
	}, []string{"class"})
)

func init() {
	metrics.Registry.MustRegister(allocationsTotal, drawsInFlight, claimsPending)
}

// pendingClaims is the set of claims that still miss an address, kept to
// keep the metallb_iad_claim_pending gauge exact as claims come and go.
// Nothing decides on it or on the gauge.
type pendingClaims struct{ claimSet }

// set records whether the claim is pending, and under which class.
func (p *pendingClaims) set(claim types.NamespacedName, class string, pending bool) {
	p.update(claim, class, pending, func(class string, n int) { claimsPending.WithLabelValues(class).Set(float64(n)) })
}

// forget drops a claim that is gone or no longer served.
func (p *pendingClaims) forget(claim types.NamespacedName) { p.set(claim, "", false) }
