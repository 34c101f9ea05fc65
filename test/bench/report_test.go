package bench

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cozystack/metallb-iad/test/cluster"
)

// conflictsCol is the 409 count of a cost and its attribution.
func conflictsCol(c cost) string {
	return fmt.Sprintf("%.0f (%.0f/%.0f/%.0f)", c.statusConflicts(), c.conflictsBy[WriterDriver], c.conflictsBy[WriterMetalLB], c.conflictsBy[WriterOther])
}

// report renders every recorded operation side by side with its baseline,
// what each cost per operation, and the targets.
func report() string {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if len(results) == 0 && len(extras) == 0 {
		return ""
	}
	var sb strings.Builder
	if len(results) == 0 {
		// Only tables of their own (BenchmarkDetachRelease alone).
		fmt.Fprintf(&sb, "\n==================== metallb-iad benchmark ====================\nMetalLB %s%s\n", cluster.MetalLBVersion(), driverEnvNote())
		for _, x := range extras {
			sb.WriteString(x)
		}
		sb.WriteString(runTime(time.Since(runStart)))
		return sb.String()
	}
	sb.WriteString("\n==================== metallb-iad benchmark: side by side with plain MetalLB, same run ====================\n")
	parking := "on (parked handoff)"
	if os.Getenv("BENCH_PARKING") == "off" {
		parking = "off (shared and gap handoffs)"
	}
	fmt.Fprintf(&sb, "MetalLB %s; parking pool %s%s\n", cluster.MetalLBVersion(), parking, driverEnvNote())
	rows := [][]string{{"OPERATION", "N", "P50", "P95", "MAX", "PER S", "BASELINE", "BASE P50", "BASE P95", "x P50", "x P95", "x PER S"}}
	for _, o := range results {
		r := []string{o.name, fmt.Sprint(o.n), fmtD(o.lat.P50), fmtD(o.lat.P95), fmtD(o.lat.Max), rate(o)}
		if o.base != nil {
			r = append(r, o.base.name, fmtD(o.base.lat.P50), fmtD(o.base.lat.P95),
				x(Ms(o.lat.P50), Ms(o.base.lat.P50)), x(Ms(o.lat.P95), Ms(o.base.lat.P95)), x(o.rate(), o.base.rate()))
		} else {
			r = append(r, "(baseline)", "", "", "", "", "")
		}
		rows = append(rows, r)
	}
	sb.WriteString(table("Latency (client clock: the action's API call -> the benchmark's informer sees the result); PER S = N / (first action -> last done)", rows))
	sb.WriteString(throughputTable(results))
	sb.WriteString(hopTable("Claim hops", ClaimStates, results))
	sb.WriteString(hopTable("Attach hops", AttachStates, results))

	rows = [][]string{{"OPERATION", "API REQ/OP (all clients)", "DRIVER REQ/OP", "DRIVER WRITES/OP", "DRIVER PASSES/OP " + strings.Join(cluster.Controllers, "/"), "METALLB RECONCILES/OP", "FULL PASSES/OP", "FORCED RELOADS", "FAILED PASSES", "STATUS 409s (DRIVER/METALLB/USER)", "UPDATE FAILURES", "CPU s " + strings.Join(cpuProcs, "/") + " (settling included)", "MACHINE BUSY (OP WINDOW)"}}
	for _, o := range results {
		c, n := o.cost, float64(o.n)
		rows = append(rows, []string{o.name, f1(Total(c.reqs, "leases") / n), f1(c.driverReqs / n), f1(c.driverWrites / n), passesCol(c.passes, n),
			f1(float64(c.metallb.Reconciles) / n), f2(float64(c.metallb.FullPasses) / n), fmt.Sprint(c.metallb.ForcedReloads),
			fmt.Sprint(c.metallb.FailedPasses), conflictsCol(c), fmt.Sprint(c.metallb.UpdateFailures),
			cpuCol(c.cpu), share(o.window)})
	}
	sb.WriteString(table("Cost per operation: API requests (apiserver_request_total, leases left out), the driver's own requests and writes "+
		"(rest_client_requests_total of its four controllers, lease renewals left out), each driver process's reconciles "+
		"(controller_runtime_reconcile_total of every controller it runs), MetalLB's reconciles, full passes over every Service, "+
		"forced reloads and failed passes (its log), and its status updates refused with 409 (apiserver_request_total), each attributed to "+
		"the last writer of that Service before it (the API server's audit log): the driver, MetalLB itself (a pass read the Service from a cache "+
		"that did not show its own write yet) or the user (the benchmark's actions); CPU seconds per process from snapshot to snapshot, the "+
		"settling after the operation included; the machine's busy share over the operation's own window, first action -> last item done "+
		"(summed over repetitions), settling not included", rows))

	sb.WriteString(watchingTable(results))

	rows = [][]string{{"OPERATION", "API REQUESTS PER OP BY VERB AND RESOURCE (every client; leases left out)"}}
	for _, o := range results {
		rows = append(rows, []string{o.name, PerOp(o.cost.reqs, o.n, "leases")})
	}
	sb.WriteString(table("Requests per operation by verb and resource", rows))

	rows = [][]string{{"OPERATION", "DRIVER WRITES PER OP BY CONTROLLER AND VERB (POST, PATCH, DELETE; Events included)"}}
	for _, o := range results {
		rows = append(rows, []string{o.name, writesCol(o.cost.writesBy, o.n)})
	}
	sb.WriteString(table("Where the driver's writes go", rows))

	rows = [][]string{{"OPERATION", "DRIVER PASSES PER OP BY CONTROLLER (controller_runtime_reconcile_total; a process runs more than one)"}}
	for _, o := range results {
		rows = append(rows, []string{o.name, passesByCol(o.cost.passes, float64(o.n))})
	}
	sb.WriteString(table("Where the driver's passes go", rows))
	for _, x := range extras {
		sb.WriteString(x)
	}
	total := time.Since(runStart)
	sb.WriteString(runTime(total))
	sb.WriteString(renderVerdicts(verdicts(runFigures{ops: results, metallb: cluster.MetalLBVersion(), rssAt: rssAt, restarts: restarts,
		total: total, whole: os.Getenv("BENCH_SCALE") == "" && ranAll()})))
	return sb.String()
}

// share formats the busy share of a window, "-" for an empty one.
func share(w MachineCPU) string {
	r := w.Share()
	if math.IsNaN(r) {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*r)
}

// throughputTable sets each N's claims per second, to Bound and to Bound
// and Held, beside plain MetalLB's Services per second at the same N.
func throughputTable(ops []*op) string {
	f := runFigures{ops: ops}
	rows := [][]string{{"N", "PLAIN SERVICE -> IP PER S", "CLAIM -> BOUND PER S", "x PLAIN", "CLAIM -> BOUND AND HELD PER S", "x PLAIN"}}
	for _, o := range ops {
		var n int
		if _, err := fmt.Sscanf(o.name, "claim -> Bound, N=%d", &n); err != nil || o.base == nil || o.name != fmt.Sprintf("claim -> Bound, N=%d", n) {
			continue
		}
		r := []string{fmt.Sprint(n), rate(o.base), rate(o), x(o.rate(), o.base.rate())}
		if h := f.opNamed(fmt.Sprintf("claim -> Bound and Held, N=%d", n)); h != nil {
			r = append(r, rate(h), x(h.rate(), h.base.rate()))
		} else {
			r = append(r, "–", "–")
		}
		rows = append(rows, r)
	}
	if len(rows) == 1 {
		return ""
	}
	return table("Claim throughput: N / (first create -> last claim there), beside plain MetalLB's N Services / (first create -> last address)", rows)
}

// hopTable renders, for each operation traced through states, each hop's
// p50 / p95 over its items.
func hopTable(title string, states []string, ops []*op) string {
	rows := [][]string{append(append([]string{"OPERATION", "N"}, HopHeader(states)...), "SEEN OUT OF ORDER")}
	for _, o := range ops {
		if !slices.Equal(o.states, states) {
			continue
		}
		hs := SummarizeHops(o.traces, len(states))
		r := []string{o.name, fmt.Sprint(len(o.traces))}
		for _, h := range hs {
			r = append(r, HopCell(h, len(o.traces)))
		}
		rows = append(rows, append(r, EarlyCell(hs, states)))
	}
	if len(rows) == 1 {
		return ""
	}
	return table(title+" ("+strings.Join(states, " -> ")+"): each column is p50 / p95 of the time from the latest earlier state seen to "+
		"this one, the first time the benchmark's informers saw it (the first is the benchmark's own API call); – where no item "+
		"showed the state, (k of n) where only k did; a state seen before an earlier one counts 0 and is listed as out of order", rows)
}

// runTime is the table of where the run's time went: each benchmark's wall
// time and the part of it MetalLB spent in full passes over every Service,
// and the whole run's (total, since the process started).
func runTime(total time.Duration) string {
	rows := [][]string{{"BENCHMARK", "WALL", "METALLB FULL PASSES", "TIME IN FULL PASSES", "SHARE"}}
	var passes int
	var in time.Duration
	for _, bc := range benches {
		rows = append(rows, []string{bc.name, fmtD(bc.wall.Round(time.Second)), fmt.Sprint(bc.passes), fmtD(bc.inPasses), pct(bc.inPasses, bc.wall)})
		passes += bc.passes
		in += bc.inPasses
	}
	rows = append(rows, []string{"whole run (this process)", fmtD(total.Round(time.Second)), fmt.Sprint(passes), fmtD(in), pct(in, total)})
	return table("Where the run's time went (full passes from MetalLB's log, to the second)", rows)
}

func pct(part, whole time.Duration) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*part.Seconds()/whole.Seconds())
}

func rate(o *op) string {
	r := o.rate()
	if math.IsNaN(r) || o.total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", r)
}

func x(a, b float64) string {
	r := Ratio(a, b)
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r)
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

// allBenchmarks are the benchmarks of a whole run, as beginBench names them.
var allBenchmarks = []string{"Handoff", "WarmReservations", "ClaimToBound", "DetachRelease"}

// standaloneBenchmarks run without a control plane and print their own
// figures; the report does not wait for them.
var standaloneBenchmarks = []string{"ShutDown"}

// ranAll reports whether every benchmark of a whole run ran in this process.
func ranAll() bool {
	for _, name := range allBenchmarks {
		if !slices.ContainsFunc(benches, func(bc *benchClock) bool { return bc.name == name }) {
			return false
		}
	}
	return true
}

// driverEnvNote names what METALLB_IAD_DRIVER_ENV adds to the driver's
// environment (cluster.DriverEnv), so a run under it is never read as a
// default one.
func driverEnvNote() string {
	env := cluster.DriverEnv()
	if len(env) == 0 {
		return ""
	}
	return "; the driver binaries run with " + strings.Join(env, " ") + " (METALLB_IAD_DRIVER_ENV)"
}
