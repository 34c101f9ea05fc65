package ipaddress

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
)

func TestAddressState(t *testing.T) {
	withHeld := func(a *iadv1alpha1.IPAddress, status metav1.ConditionStatus, reason string) *iadv1alpha1.IPAddress {
		conditions.Set(&a.Status.Conditions, conditions.Held, status, reason, "", 1)
		return a
	}
	conflict := address("a", "192.0.2.7")
	conflict.Status.Phase = iadv1alpha1.AddressConflict
	assert.Equal(t, stateConflict, addressState(conflict))
	lost := address("a", "192.0.2.7")
	lost.Status.Phase = iadv1alpha1.AddressLost
	assert.Equal(t, stateLost, addressState(lost))
	assert.Equal(t, stateAssociated, addressState(associated(address("a", "192.0.2.7"), "t", "web")))
	assert.Equal(t, stateHeld, addressState(withHeld(address("a", "192.0.2.7"), metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder)))
	assert.Equal(t, stateConflict, addressState(withHeld(address("a", "192.0.2.7"), metav1.ConditionFalse, conditions.ReasonTakenElsewhere)))
	assert.Equal(t, stateWaiting, addressState(withHeld(address("a", "192.0.2.7"), metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB)))
	assert.Equal(t, stateWaiting, addressState(address("a", "192.0.2.7")))
}

func TestAddressStatesGauge(t *testing.T) {
	var st addressStates
	g := func(class, state string) float64 {
		var m dto.Metric
		require.NoError(t, addressesGauge.WithLabelValues(class, state).Write(&m))
		return m.GetGauge().GetValue()
	}
	st.set("a", "metrics-test", stateWaiting)
	st.set("b", "metrics-test", stateWaiting)
	assert.Equal(t, 2.0, g("metrics-test", stateWaiting))
	st.set("a", "metrics-test", stateHeld)
	st.set("a", "metrics-test", stateHeld)
	assert.Equal(t, 1.0, g("metrics-test", stateWaiting))
	assert.Equal(t, 1.0, g("metrics-test", stateHeld))
	st.forget("a")
	st.forget("a")
	st.forget("never-seen")
	assert.Equal(t, 0.0, g("metrics-test", stateHeld))
	assert.Equal(t, 1.0, g("metrics-test", stateWaiting))
}
