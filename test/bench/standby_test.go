package bench

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cozystack/metallb-iad/test/cluster"
)

// watchFloorOn says whether the claim burst at the largest N runs beside a
// warm standby of each controller (BENCH_WATCH_FLOOR=1): what watching
// alone costs, measured. Off by default: the standbys take CPU from the
// run's own figures.
func watchFloorOn() bool { return os.Getenv("BENCH_WATCH_FLOOR") != "" }

// standbyKey names a controller's standby among an operation's processes
// (cost.cpu).
func standbyKey(ctl string) string { return ctl + " standby" }

// standbys are one warm standby of each controller (--warm-standby): a
// replica that does not hold the lease and starts its watches anyway, with
// the controller's own cache options, indexes, predicates and mappings,
// and makes no pass. Its CPU over an operation is what the controller
// spends on watching alone.
type standbys struct {
	drivers map[string]*cluster.Driver
	cpu0    map[string]time.Duration
}

// startStandbys starts the standbys and waits until each has listed what it
// watches and gone idle; nil when watchFloorOn is off.
func (e *env) startStandbys(b *testing.B) *standbys {
	b.Helper()
	if !watchFloorOn() {
		return nil
	}
	sb := &standbys{drivers: map[string]*cluster.Driver{}, cpu0: map[string]time.Duration{}}
	for _, ctl := range cluster.Controllers {
		d, err := e.s.StartReplica(e.ctx, ctl, "--warm-standby")
		require.NoError(b, err, "start a warm standby of %s", ctl)
		sb.drivers[ctl] = d
	}
	for _, ctl := range cluster.Controllers {
		d := sb.drivers[ctl]
		idle(b, d)
		require.False(b, d.IsLeader(), "the %s standby took the lease: its figures would be a controller's", ctl)
		t, err := ReadProcCPU(d.Pid())
		require.NoError(b, err)
		sb.cpu0[ctl] = t
	}
	step("warm standbys up")
	return sb
}

// idle waits up to a minute until a process spends under 10 ms of CPU in a
// second.
func idle(b *testing.B, d *cluster.Driver) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	last, err := ReadProcCPU(d.Pid())
	require.NoError(b, err)
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		now, err := ReadProcCPU(d.Pid())
		require.NoError(b, err)
		if now-last < 10*time.Millisecond {
			return
		}
		last = now
	}
	fmt.Printf("bench: the %s standby is still busy after a minute; going on\n", d.Controller)
}

// stop adds each standby's CPU since it went idle to c.cpu (standbyKey),
// checks none took its lease meanwhile, and stops them.
func (sb *standbys) stop(b *testing.B, c *cost) {
	b.Helper()
	if sb == nil {
		return
	}
	for _, ctl := range cluster.Controllers {
		d := sb.drivers[ctl]
		t, err := ReadProcCPU(d.Pid())
		require.NoError(b, err)
		require.False(b, d.IsLeader(), "the %s standby took the lease during the operation", ctl)
		m, err := Scrape(d.MetricsAddr)
		require.NoError(b, err)
		require.Zero(b, m.Sum("controller_runtime_reconcile_total"), "the %s standby made a pass", ctl)
		require.Empty(b, WritesByController(map[string]Metrics{}, map[string]Metrics{ctl: m}), "the %s standby wrote", ctl)
		c.cpu[standbyKey(ctl)] = t - sb.cpu0[ctl]
		d.Kill()
	}
}

// watchingPerOp is the CPU the controllers' standbys spent together per
// item of o, 0 when none ran beside it.
func watchingPerOp(o *op) time.Duration {
	var d time.Duration
	for _, c := range cluster.Controllers {
		d += procCPUPerOp(o, standbyKey(c))
	}
	return d
}

// watchingTable sets, for each operation the standbys ran beside, each
// controller's CPU per item watching alone against its own.
func watchingTable(ops []*op) string {
	rows := [][]string{{"OPERATION", "CONTROLLER", "WATCHING ALONE PER ITEM", "THE CONTROLLER PER ITEM", "WATCHING'S SHARE", "x METALLB"}}
	for _, o := range ops {
		w := watchingPerOp(o)
		if w == 0 {
			continue
		}
		m := procCPUPerOp(o, "metallb")
		for _, ctl := range cluster.Controllers {
			s, own := procCPUPerOp(o, standbyKey(ctl)), procCPUPerOp(o, ctl)
			rows = append(rows, []string{o.name, ctl, fmtCPU(s), fmtCPU(own), pct(s, own), x(Ms(s), Ms(m))})
		}
		rows = append(rows, []string{o.name, "all four", fmtCPU(w), fmtCPU(driverCPUPerOp(o)), pct(w, driverCPUPerOp(o)), x(Ms(w), Ms(m))})
	}
	if len(rows) == 1 {
		return ""
	}
	return table("Watching alone (BENCH_WATCH_FLOOR): a warm standby of each controller (--warm-standby: its watches, indexes and event "+
		"handlers, no pass) ran beside it; its CPU per item against the controller's own and MetalLB's", rows)
}

func TestWatchingTable(t *testing.T) {
	ms := time.Millisecond
	plain := &op{name: "claim -> Bound, N=10", n: 10, cost: cost{cpu: map[string]time.Duration{"class": 10 * ms, "claim": 50 * ms, "metallb": 40 * ms}}}
	require.Zero(t, watchingPerOp(plain), "no standby ran")
	require.Empty(t, watchingTable([]*op{plain}))

	o := &op{name: "claim -> Bound, N=10", n: 10, cost: cost{cpu: map[string]time.Duration{
		"class": 10 * ms, "claim": 50 * ms, "service": 20 * ms, "ipaddress": 20 * ms, "metallb": 40 * ms,
		standbyKey("class"): 10 * ms, standbyKey("claim"): 10 * ms, standbyKey("service"): 10 * ms, standbyKey("ipaddress"): 10 * ms,
	}}}
	require.Equal(t, 4*ms, watchingPerOp(o), "the four standbys' CPU per claim")
	got := watchingTable([]*op{plain, o})
	require.Contains(t, got, "claim -> Bound, N=10  class")
	require.Regexp(t, `all four\s+4ms\s+10ms\s+40%\s+1\.00x`, got, "together: 4 ms of the controllers' 10 ms, MetalLB's 4 ms")
}
