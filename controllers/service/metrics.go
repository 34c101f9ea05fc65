package service

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	handoffSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "metallb_iad_handoff_seconds",
		Help:    "Seconds from the service controller first seeing a Service ask for a bound claim to the Service holding the claim's addresses in status.loadBalancer.ingress.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	})
	handoffUnheldSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "metallb_iad_handoff_unheld_seconds",
		Help:    "Seconds an address spent held by nothing during a gap or parked handoff: from the service controller seeing the placeholder release it (Held=False) to the Service holding it in status.loadBalancer.ingress. Shared handoffs have no such gap and are not observed.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	})
	handoffsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metallb_iad_handoffs_total",
		Help: "Handoffs the service controller ran, by direction (attach: measured attaches that completed; detach: detaches that asked MetalLB to take the addresses back) and mode (shared: never unheld; gap: unheld for a moment; parked: unheld for a moment, the placeholder parked instead of deleted).",
	}, []string{"direction", "mode"})
	unauthorizedHolders = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metallb_iad_unauthorized_holders",
		Help: "Services holding an address of a class's ranges (status.loadBalancer.ingress) that the ledger does not authorize: no IPAddress records it, or the IPAddress's binding does not name the Service.",
	}, []string{"class"})
	importsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metallb_iad_imports_total",
		Help: "Addresses MetalLB had assigned to plain Services that the service controller imported into generated claims (result=imported), left alone with a Warning Event (result=skipped, once per Service and reason) or failed to import in a pass (result=failed, retried), per class with adoptExisting.",
	}, []string{"class", "result"})
)

// Directions, the values of the "direction" label of metallb_iad_handoffs_total.
const (
	directionAttach = "attach"
	directionDetach = "detach"
)

// Results, the values of the "result" label of metallb_iad_imports_total.
const (
	importImported = "imported"
	importSkipped  = "skipped"
	importFailed   = "failed"
)

func init() {
	metrics.Registry.MustRegister(handoffSeconds, handoffUnheldSeconds, handoffsTotal, unauthorizedHolders, importsTotal)
	for _, d := range []string{directionAttach, directionDetach} {
		for _, m := range []string{ModeShared, ModeGap} {
			handoffsTotal.WithLabelValues(d, m)
		}
	}
}

type handoff struct {
	uid     types.UID
	started time.Time
	unheld  time.Time
}

// handoffs remembers when this process first saw each association in
// progress, for the metrics only: after a restart one in flight is not
// measured.
type handoffs struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*handoff
	// now is the clock; tests may replace it.
	now func() time.Time
}

func newHandoffs() *handoffs {
	return &handoffs{m: map[types.NamespacedName]*handoff{}, now: time.Now}
}

// start records the first sight of an association in progress.
func (h *handoffs) start(key types.NamespacedName, uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[key]; e == nil || e.uid != uid {
		h.m[key] = &handoff{uid: uid, started: h.now()}
	}
}

// released records the first sight of a hold released for it.
func (h *handoffs) released(key types.NamespacedName, uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[key]; e != nil && e.uid == uid && e.unheld.IsZero() {
		e.unheld = h.now()
	}
}

// done observes a finished association (one seen to start) and forgets it.
func (h *handoffs) done(key types.NamespacedName, uid types.UID, mode string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[key]
	delete(h.m, key)
	if e == nil || e.uid != uid {
		return
	}
	now := h.now()
	handoffSeconds.Observe(now.Sub(e.started).Seconds())
	handoffsTotal.WithLabelValues(directionAttach, mode).Inc()
	if mode != ModeShared && !e.unheld.IsZero() {
		handoffUnheldSeconds.Observe(now.Sub(e.unheld).Seconds())
	}
}

// forget drops an association that will not complete (detached, deleted).
func (h *handoffs) forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, key)
}
