package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDemo runs the README's `make demo` story through (as --no-wait does),
// so the demo cannot rot: every step waits for what it announces.
func TestDemo(t *testing.T) {
	require.NoError(t, run(false))
}
