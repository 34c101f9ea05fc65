package ipaddress

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
)

var addressesGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "metallb_iad_addresses",
	Help: "IPAddresses served by the driver, by class and state (held: a placeholder holds the address in MetalLB; " +
		"associated: attached to a workload; conflict: phase Conflict, or another Service holds the address; " +
		"lost: phase Lost, MetalLB can no longer hold the address; waiting: a placeholder waits for MetalLB).",
}, []string{"class", "state"})

func init() {
	metrics.Registry.MustRegister(addressesGauge)
}

// addressStates tracks the class and state of every served address, to keep
// the metallb_iad_addresses gauge exact as addresses come, change and go.
type addressStates struct {
	mu    sync.Mutex
	of    map[string][2]string // address name -> {class, state}
	count map[[2]string]int
}

// set records the class and state of an address.
func (t *addressStates) set(address, class, state string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.of == nil {
		t.of = map[string][2]string{}
		t.count = map[[2]string]int{}
	}
	key := [2]string{class, state}
	if old, ok := t.of[address]; ok {
		if old == key {
			return
		}
		t.dec(old)
	}
	t.of[address] = key
	t.count[key]++
	addressesGauge.WithLabelValues(key[0], key[1]).Set(float64(t.count[key]))
}

// forget drops an address that is gone, being deleted or not served.
func (t *addressStates) forget(address string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.of[address]; ok {
		delete(t.of, address)
		t.dec(old)
	}
}

func (t *addressStates) dec(key [2]string) {
	t.count[key]--
	addressesGauge.WithLabelValues(key[0], key[1]).Set(float64(t.count[key]))
}

// Address states, the values of the "state" label of metallb_iad_addresses.
const (
	stateHeld       = "held"
	stateAssociated = "associated"
	stateConflict   = "conflict"
	stateLost       = "lost"
	stateWaiting    = "waiting"
)

// addressState classifies an address for the gauge (see its help text).
func addressState(a *iadv1alpha1.IPAddress) string {
	switch a.Status.Phase {
	case iadv1alpha1.AddressConflict:
		return stateConflict
	case iadv1alpha1.AddressLost:
		return stateLost
	}
	if a.Status.AssociatedTo != nil {
		return stateAssociated
	}
	for _, c := range a.Status.Conditions {
		if c.Type != conditions.Held {
			continue
		}
		switch {
		case c.Status == metav1.ConditionTrue:
			return stateHeld
		case c.Reason == conditions.ReasonTakenElsewhere:
			return stateConflict
		}
	}
	return stateWaiting
}
