package draw

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of an allocation attempt, the values of the "result" label of
// metallb_iad_claim_allocations_total.
const (
	ResultRecorded       = "recorded"
	ResultPoolExhausted  = "pool_exhausted"
	ResultLedgerMismatch = "ledger_mismatch"
	ResultWarm           = "warm"
	ResultReturned       = "returned"
)

var (
	AllocationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metallb_iad_claim_allocations_total",
		Help: "Allocation outcomes observed by the claim controller, by class, family and result " +
			"(recorded: an IPAddress was recorded for a claim; warm: an Available IPAddress was recorded as a warm reservation; pool_exhausted: MetalLB had no free address; " +
			"ledger_mismatch: the IPAddress name of an assigned address is taken by another entry; " +
			"returned: MetalLB assigned an address the ledger records for someone else, and the driver gave it back).",
	}, []string{"class", "family", "result"})

	DrawsInFlight = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "metallb_iad_claim_draws_in_flight",
		Help: "Draws of a class in flight when a claim's draw is decided, that one included: placeholders decided on " +
			"and not yet shown by the controller's cache. Above 1, draws of one class overlap.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
	}, []string{"class"})
)

func init() {
	metrics.Registry.MustRegister(AllocationsTotal, DrawsInFlight)
}
