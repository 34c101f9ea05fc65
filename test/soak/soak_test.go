package soak

import (
	"context"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// TestSoak runs the short form of the soak (a few hundred operations,
// part of `make test`, also `make soak-short`), or the long form with
// SOAK_LONG=1 (`make soak`). SOAK_SEED, SOAK_OPS, SOAK_KILLS,
// SOAK_API_RESTARTS, SOAK_DURATION and SOAK_CONVERGE override either.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak starts a whole control plane; -short runs the pure tests only")
	}
	log.SetLogger(logr.Discard())
	base := Short()
	if os.Getenv("SOAK_LONG") != "" {
		base = Long()
	}
	cfg, err := FromEnv(base)
	require.NoError(t, err)
	rep, err := Run(context.Background(), cfg, os.Stdout)
	require.NoError(t, err)
	require.Empty(t, rep.FaultErrors, "every fault was injected and recovered from")
	require.True(t, rep.Converged, "the final invariants hold within %s after the storm (seed %d)", cfg.Converge, cfg.Seed)
	require.Zero(t, rep.Failures(), "invariant violations (seed %d): see the report above", cfg.Seed)
}
