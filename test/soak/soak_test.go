package soak

import (
	"context"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// TestSoak runs the soak only when SOAK=1 is set: the short form
// (`make soak-short`), or the long form with SOAK_LONG=1 as well
// (`make soak`). SOAK_SEED, SOAK_OPS, SOAK_KILLS, SOAK_API_RESTARTS,
// SOAK_DURATION and SOAK_CONVERGE override either. `make test` does not
// set SOAK: the short soak still finds invariant violations, so it is not
// yet part of the suite that must pass (docs/reliability.md). The
// invariant unit tests of this package run in `make test` regardless.
func TestSoak(t *testing.T) {
	if os.Getenv("SOAK") != "1" {
		t.Skip("the chaos soak runs only with SOAK=1 (make soak-short, make soak); it is not yet part of make test because it still finds violations")
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
