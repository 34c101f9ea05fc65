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
		fmt.Fprintf(&sb, "\n==================== metallb-iad benchmark ====================\nMetalLB %s\n", cluster.MetalLBVersion())
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
	fmt.Fprintf(&sb, "MetalLB %s; parking pool %s\n", cluster.MetalLBVersion(), parking)
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

	rows = [][]string{{"OPERATION", "API REQ/OP (all clients)", "DRIVER REQ/OP", "DRIVER WRITES/OP", "METALLB RECONCILES/OP", "FULL PASSES/OP", "FORCED RELOADS", "FAILED PASSES", "STATUS 409s (DRIVER/METALLB/USER)", "UPDATE FAILURES", "CPU s " + strings.Join(cpuProcs, "/"), "MACHINE BUSY"}}
	for _, o := range results {
		c, n := o.cost, float64(o.n)
		rows = append(rows, []string{o.name, f1(Total(c.reqs, "leases") / n), f1(c.driverReqs / n), f1(c.driverWrites / n),
			f1(float64(c.metallb.Reconciles) / n), f2(float64(c.metallb.FullPasses) / n), fmt.Sprint(c.metallb.ForcedReloads),
			fmt.Sprint(c.metallb.FailedPasses), conflictsCol(c), fmt.Sprint(c.metallb.UpdateFailures),
			cpuCol(c.cpu), fmt.Sprintf("%.0f%%", 100*c.busy)})
	}
	sb.WriteString(table("Cost per operation: API requests (apiserver_request_total, leases left out), the driver's own requests and writes "+
		"(rest_client_requests_total of its four controllers, lease renewals left out), MetalLB's reconciles, full passes over every Service, "+
		"forced reloads and failed passes (its log), and its status updates refused with 409 (apiserver_request_total), each attributed to "+
		"the last writer of that Service before it (the API server's audit log): the driver, MetalLB itself (a pass read the Service from a cache "+
		"that did not show its own write yet) or the user (the benchmark's actions)", rows))

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
	for _, x := range extras {
		sb.WriteString(x)
	}
	total := time.Since(runStart)
	sb.WriteString(runTime(total))
	sb.WriteString(targets(total))
	return sb.String()
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

// find returns the first recorded operation whose name starts with prefix.
func find(prefix string) *op {
	for _, o := range results {
		if strings.HasPrefix(o.name, prefix) {
			return o
		}
	}
	return nil
}

// findAll returns the recorded operations whose name contains every part.
func findAll(parts ...string) []*op {
	var out []*op
	for _, o := range results {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(o.name, p)
		}
		if ok {
			out = append(out, o)
		}
	}
	return out
}

// targets checks the figures of this run against the project's targets.
func targets(total time.Duration) string {
	rows := [][]string{{"TARGET", "MEASURED", "MET"}}
	add := func(target, measured string, met bool, known bool) {
		v := "no"
		switch {
		case !known:
			v, measured = "not measured", "-"
		case met:
			v = "yes"
		}
		rows = append(rows, []string{target, measured, v})
	}

	for _, kind := range []string{"shared", "gap"} {
		for _, dir := range []string{"attach", "detach"} {
			o := find(kind + " " + dir + ", one at a time, idle")
			add(fmt.Sprintf("single %s %s, idle: p50 <= 150ms", kind, dir), summ(o), o != nil && o.lat.P50 <= 150*time.Millisecond, o != nil)
		}
	}
	for _, o := range findAll("at once, 1000 background") {
		if o.base == nil {
			continue
		}
		ok := o.lat.P95 <= 2*o.base.lat.P95 && o.lat.Max <= 2*time.Second
		add("30 at once, 1000 background: p95 <= 2x plain re-pin p95, max <= 2s ("+strings.SplitN(o.name, ",", 2)[0]+")",
			fmt.Sprintf("p95 %s (%s of %s), max %s", fmtD(o.lat.P95), x(Ms(o.lat.P95), Ms(o.base.lat.P95)), fmtD(o.base.lat.P95), fmtD(o.lat.Max)), ok, true)
	}
	passTargets(add)
	if o := find("claim -> Bound, N=1000"); o != nil {
		ok := Ms(o.lat.P50) <= 1.5*Ms(o.base.lat.P50) && o.rate() >= 0.8*o.base.rate()
		add("claim -> Bound, N=1000: p50 <= 1.5x plain, throughput >= 0.8x plain",
			fmt.Sprintf("p50 %s, throughput %s", x(Ms(o.lat.P50), Ms(o.base.lat.P50)), x(o.rate(), o.base.rate())), ok, true)
	} else {
		add("claim -> Bound, N=1000: p50 <= 1.5x plain, throughput >= 0.8x plain", "", false, false)
	}
	if o := find("claim -> Bound, warm"); o != nil {
		add("warm reservations covering the burst: claim -> Bound p50 <= 100ms", summ(o), o.lat.P50 <= 100*time.Millisecond, true)
	} else {
		add("warm reservations covering the burst: claim -> Bound p50 <= 100ms", "", false, false)
	}
	var conflicts float64
	by := map[string]float64{}
	for _, o := range results {
		if o.base != nil {
			conflicts += o.cost.statusConflicts()
			for k, v := range o.cost.conflictsBy {
				by[k] += v
			}
		}
	}
	add("driver-caused MetalLB status conflicts: 0", fmt.Sprintf("%.0f after a driver write (of %.0f 409s during driver operations: %.0f after MetalLB's own write, %.0f after the user's)",
		by[WriterDriver], conflicts, by[WriterMetalLB], by[WriterOther]), by[WriterDriver] == 0, true)
	worstClaim, worstHandoff := 0.0, 0.0
	for _, o := range results {
		w := o.cost.driverWrites / float64(o.n)
		switch {
		case o.base != nil && strings.HasPrefix(o.name, "claim -> Bound,"):
			worstClaim = max(worstClaim, w)
		case o.base != nil && (strings.Contains(o.name, "attach") || strings.Contains(o.name, "detach")):
			worstHandoff = max(worstHandoff, w)
		}
	}
	add("driver writes <= 6 per claim", fmt.Sprintf("worst %.1f", worstClaim), worstClaim <= 6, find("claim -> Bound,") != nil)
	add("driver writes <= 4 per handoff", fmt.Sprintf("worst %.1f", worstHandoff), worstHandoff <= 4, find("shared attach") != nil)
	claimsRuns := findAll("claim -> Bound, N=")
	if len(claimsRuns) >= 2 {
		a, z := claimsRuns[0], claimsRuns[len(claimsRuns)-1]
		per := func(o *op) float64 { return Total(o.cost.reqs, "leases") / float64(o.n) }
		r := Ratio(per(z), per(a))
		add(fmt.Sprintf("per-claim cost flat within +-20%% (API requests per claim, N=%d vs N=%d)", z.n, a.n),
			fmt.Sprintf("%.1f vs %.1f (%.2fx)", per(z), per(a), r), r >= 0.8 && r <= 1.2, true)
	}
	if len(memRSS) > 0 {
		var worst ProcMem
		who := ""
		for c, v := range memRSS {
			if v.RSS > worst.RSS {
				worst, who = v, c
			}
		}
		add("RSS <= 64 MiB per controller at the largest N",
			fmt.Sprintf("largest %s (%s; %s anonymous, %s file-backed)", MiB(worst.RSS), who, MiB(worst.Anon), MiB(worst.File)),
			worst.RSS <= 64<<20, true)
	}
	if len(restarts) > 0 {
		var slowest time.Duration
		var writes float64
		for _, r := range restarts {
			slowest = max(slowest, r.converge)
			writes += ResyncWrites(r.cost.reqs)
		}
		add("restart converges in <= 10s with zero writes", fmt.Sprintf("slowest %s, %.0f writes in all", fmtD(slowest), writes), slowest <= 10*time.Second && writes == 0, true)
	}
	add("the default run within 15 minutes (this process; the build before it not counted)",
		fmtD(total.Round(time.Second)), total <= 15*time.Minute, os.Getenv("BENCH_SCALE") == "" && ranAll())
	return table("Targets (figures of this run)", rows)
}

// passTargets checks MetalLB's full passes per handoff and how the handoff
// cost grows with the Services in the cluster.
func passTargets(add func(target, measured string, met, known bool)) {
	passes, attaches := 0, 0
	for _, o := range findAll(" attach, ") {
		if o.base != nil {
			passes += o.cost.metallb.FullPasses
			attaches += o.n
		}
	}
	add("attaches cause no MetalLB full pass", fmt.Sprintf("%d full passes in %d attaches", passes, attaches), passes == 0, attaches > 0)
	for _, o := range findAll(" detach, ", " at once, ") {
		per := float64(o.cost.metallb.FullPasses) / float64(o.n)
		add("detaches at once: at most one full pass each ("+strings.SplitN(o.name, " (", 2)[0]+")",
			fmt.Sprintf("%.2f per detach", per), per <= 1, true)
	}
	bgs := backgrounds()
	if len(bgs) < 2 {
		return
	}
	lo, hi := bgs[0], bgs[len(bgs)-1]
	for _, kind := range []string{"shared", "gap"} {
		for _, dir := range []string{"attach", "detach"} {
			a := find(fmt.Sprintf("%s %s, 30 at once, %d background", kind, dir, lo))
			z := find(fmt.Sprintf("%s %s, 30 at once, %d background", kind, dir, hi))
			target := fmt.Sprintf("%s %s p50 flat within 20%% from %d to %d background Services", kind, dir, lo, hi)
			if a == nil || z == nil {
				add(target, "", false, false)
				continue
			}
			r := Ratio(Ms(z.lat.P50), Ms(a.lat.P50))
			add(target, fmt.Sprintf("%s vs %s (%.2fx)", fmtD(z.lat.P50), fmtD(a.lat.P50), r), r <= 1.2, true)
		}
	}
}

// backgrounds are the background Service counts the handoff rows ran with,
// smallest first.
func backgrounds() []int {
	var out []int
	for _, o := range findAll(" attach, 30 at once, ") {
		var kind, dir string
		var bg int
		if _, err := fmt.Sscanf(o.name, "%s %s 30 at once, %d background", &kind, &dir, &bg); err == nil && !slices.Contains(out, bg) {
			out = append(out, bg)
		}
	}
	slices.Sort(out)
	return out
}

func summ(o *op) string {
	if o == nil {
		return "-"
	}
	return fmt.Sprintf("p50 %s, p95 %s, max %s", fmtD(o.lat.P50), fmtD(o.lat.P95), fmtD(o.lat.Max))
}

// allBenchmarks are the benchmarks of a whole run, as beginBench names them.
var allBenchmarks = []string{"Handoff", "WarmReservations", "ClaimToBound", "DetachRelease"}

// ranAll reports whether every benchmark of a whole run ran in this process.
func ranAll() bool {
	for _, name := range allBenchmarks {
		if !slices.ContainsFunc(benches, func(bc *benchClock) bool { return bc.name == name }) {
			return false
		}
	}
	return true
}
