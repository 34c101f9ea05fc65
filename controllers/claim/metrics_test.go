package claim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

func TestPendingGauge(t *testing.T) {
	var p pendingClaims
	a := types.NamespacedName{Namespace: "t", Name: "a"}
	b := types.NamespacedName{Namespace: "t", Name: "b"}
	p.set(a, "gauge-x", true)
	p.set(a, "gauge-x", true)
	p.set(b, "gauge-x", true)
	assert.Equal(t, 2, p.count["gauge-x"])
	p.set(a, "gauge-y", true) // retargeted
	assert.Equal(t, 1, p.count["gauge-x"])
	assert.Equal(t, 1, p.count["gauge-y"])
	p.set(b, "gauge-x", false)
	p.forget(a)
	assert.Equal(t, 0, p.count["gauge-x"])
	assert.Equal(t, 0, p.count["gauge-y"])
}
