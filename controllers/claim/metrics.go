package claim

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	claimsPending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metallb_iad_claim_pending",
		Help: "Claims served by this driver that still miss an address, by class.",
	}, []string{"class"})
)

func init() {
	metrics.Registry.MustRegister(claimsPending)
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
