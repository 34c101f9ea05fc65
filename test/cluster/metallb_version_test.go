package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMetalLBFlags(t *testing.T) {
	assert.Nil(t, metallbFlags("", 1), "a version not recorded: none")
	assert.Nil(t, metallbFlags("v0.15.2", 1))
	assert.Nil(t, metallbFlags("v0.15.3", 1))
	assert.Equal(t, []string{"-pod-name", "metallb-controller", "-health-probe-port", "7"}, metallbFlags("v0.16.1", 7))
	assert.Equal(t, []string{"-pod-name", "metallb-controller", "-health-probe-port", "7"}, metallbFlags("v1.0.0", 7))
	assert.Nil(t, metallbFlags("main", 7))
}

func TestCountFullPasses(t *testing.T) {
	log := `{"caller":"service_controller_reload.go:63","controller":"ServiceReconciler - reprocessAll","level":"info","start reconcile":"metallbreload/reload","ts":"x"}
{"caller":"service_controller_reload.go:113","controller":"ServiceReconciler - reprocessAll","event":"force service reload","level":"info","ts":"x"}
{"caller":"service_controller.go:64","controller":"ServiceReconciler","level":"info","start reconcile":"ns/a","ts":"x"}
{"caller":"service_controller_reload.go:63","controller":"ServiceReconciler - reprocessAll","level":"info","start reconcile":"metallbreload/reload","ts":"x"}`
	if got := CountFullPasses(log); got != 2 {
		t.Fatalf("CountFullPasses = %d, want 2", got)
	}
}
