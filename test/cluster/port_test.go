package cluster

import (
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFreePortBelowEphemeralRange checks that FreePort never returns a port
// the kernel could give an outgoing connection, and that the port is free.
func TestFreePortBelowEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		p, err := FreePort()
		require.NoError(t, err)
		assert.GreaterOrEqual(t, p, 10000)
		assert.Less(t, p, lo, "below the ephemeral range")
		seen[p] = true
	}
	assert.Greater(t, len(seen), 40, "picks are spread out, so two test processes rarely choose the same")

	p, err := FreePort()
	require.NoError(t, err)
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	require.NoError(t, err, "the port returned can be bound")
	l.Close()
}
