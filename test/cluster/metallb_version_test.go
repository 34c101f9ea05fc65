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
