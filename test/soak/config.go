// Package soak is the driver's chaos soak: the whole stack on the local
// control plane (the real MetalLB controller, the reference core and the
// four driver binaries as separate processes, two replicas each), a seeded
// random mix of tenant, admin and out-of-band operations with process kills
// and API server restarts in between, an invariant watcher over the API's
// watch streams during the whole run, and the final invariants once the
// system has converged. Every check and every violation is counted and
// printed.
//
// `make test` and `make soak-short` run the short form, `make soak` the
// long form (SOAK_LONG=1). The seed is printed first: SOAK_SEED replays the
// same mix of operations and faults (the cluster's own timing is never
// replayed exactly).
package soak

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// Config bounds one soak run.
type Config struct {
	// Seed drives every random choice of the run.
	Seed int64
	// Ops is how many operations the storm issues (faults not counted).
	Ops int
	// Kills is how many SIGKILL-and-restart faults the storm spreads over
	// the controllers' replicas and the MetalLB controller.
	Kills int
	// APIRestarts is how many times the API server is restarted (etcd
	// kept), each right after an attach.
	APIRestarts int
	// Duration bounds the storm; it stops early when its time is up.
	Duration time.Duration
	// Converge bounds the wait for the final invariants after the storm.
	Converge time.Duration
	// Grace is how long a double hold may last before it counts as a
	// violation, unless its address is in phase Conflict by then (the time
	// the driver has to notice and report it), and how long a Lost phase
	// may wait for its Warning Event.
	Grace time.Duration
	// Quiet is how long resourceVersions must stay unchanged at the end.
	Quiet time.Duration
}

// Short is the form `make soak-short` runs: a few hundred operations.
func Short() Config {
	return Config{Seed: time.Now().UnixNano() % 1_000_000, Ops: 250, Kills: 6, APIRestarts: 1,
		Duration: 75 * time.Second, Converge: 5 * time.Minute, Grace: 30 * time.Second, Quiet: 10 * time.Second}
}

// Long is the form `make soak` runs: thousands of operations and dozens
// of kills.
func Long() Config {
	c := Short()
	c.Ops, c.Kills, c.APIRestarts = 5000, 50, 5
	c.Duration, c.Converge = 40*time.Minute, 5*time.Minute
	return c
}

// FromEnv returns base with SOAK_SEED, SOAK_OPS, SOAK_KILLS,
// SOAK_API_RESTARTS, SOAK_DURATION and SOAK_CONVERGE applied.
func FromEnv(base Config) (Config, error) {
	c := base
	ints := map[string]*int{"SOAK_OPS": &c.Ops, "SOAK_KILLS": &c.Kills, "SOAK_API_RESTARTS": &c.APIRestarts}
	for k, p := range ints {
		if v := os.Getenv(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return c, fmt.Errorf("%s=%q: want a count", k, v)
			}
			*p = n
		}
	}
	if v := os.Getenv("SOAK_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return c, fmt.Errorf("SOAK_SEED=%q: want an integer", v)
		}
		c.Seed = n
	}
	durs := map[string]*time.Duration{"SOAK_DURATION": &c.Duration, "SOAK_CONVERGE": &c.Converge}
	for k, p := range durs {
		if v := os.Getenv(k); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return c, fmt.Errorf("%s=%q: want a duration such as 20m", k, v)
			}
			*p = d
		}
	}
	return c, nil
}
