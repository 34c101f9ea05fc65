package ipaddress

import (
	"testing"

	"github.com/stretchr/testify/assert"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

func TestHandBackPhase(t *testing.T) {
	assert.Equal(t, iadv1alpha1.AddressBound, handBackPhase(bindingStands))
	assert.Equal(t, iadv1alpha1.AddressAvailable, handBackPhase(bindingNone))
	assert.Equal(t, iadv1alpha1.AddressAvailable, handBackPhase(bindingBroken))
}
