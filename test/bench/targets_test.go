package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cozystack/metallb-iad/test/cluster"
)

// The verdict of one target.
const (
	pass = "PASS"
	miss = "MISS"
	// skip: the run did not measure it (a smaller scale, another MetalLB).
	skip = "SKIP"
)

// verdict is one target judged on a run's figures.
type verdict struct {
	state, target, measured string
}

// targetMetalLB is the MetalLB release the claim targets are set for.
const targetMetalLB = "v0.16.1"

// claimRateFloor is the claims per second at N=1,000 of the latest run
// BENCHMARKS.md records (on 8c8abc5, this 2-core machine): no change may
// lower it.
const claimRateFloor = 18.7

// runFigures are what the verdicts judge: the run's operations and what
// it measured besides them.
type runFigures struct {
	ops []*op
	// metallb is the MetalLB release the run used.
	metallb string
	// rssAt is each controller's memory with the claims of each N in place.
	rssAt    map[int]map[string]ProcMem
	restarts []restartResult
	// total is the run's time; whole says it was a default-scale run of
	// every benchmark, the one the time budget is set for.
	total time.Duration
	whole bool
}

// opNamed is the operation named exactly name, or nil.
func (f runFigures) opNamed(name string) *op {
	for _, o := range f.ops {
		if o.name == name {
			return o
		}
	}
	return nil
}

// opsWith are the operations compared with a baseline whose name holds
// every part.
func (f runFigures) opsWith(parts ...string) []*op {
	var out []*op
	for _, o := range f.ops {
		ok := o.base != nil
		for _, p := range parts {
			ok = ok && strings.Contains(o.name, p)
		}
		if ok {
			out = append(out, o)
		}
	}
	return out
}

// backgrounds are the background Service counts the 30-at-once handoff
// rows ran with, smallest first.
func (f runFigures) backgrounds() []int {
	var out []int
	for _, o := range f.opsWith(" attach, 30 at once, ") {
		var kind, dir string
		var bg int
		if _, err := fmt.Sscanf(o.name, "%s %s 30 at once, %d background", &kind, &dir, &bg); err == nil && !slices.Contains(out, bg) {
			out = append(out, bg)
		}
	}
	slices.Sort(out)
	return out
}

// servicesIn reads "(N Services)" at the end of an operation's name.
func servicesIn(name string) int {
	i := strings.LastIndex(name, "(")
	var n int
	if i < 0 {
		return 0
	}
	if _, err := fmt.Sscanf(name[i:], "(%d Services)", &n); err != nil {
		return 0
	}
	return n
}

// kind is the handoff an operation measured: its name up to the first comma.
func kind(o *op) string { return strings.SplitN(o.name, ",", 2)[0] }

func apiPerOp(o *op) float64 { return Total(o.cost.reqs, "leases") / float64(o.n) }

// verdicts judges every target on f, in the order the report prints them:
// the project's targets first, then the standing ones (full passes, writes
// per claim, restart, the run's time).
func verdicts(f runFigures) []verdict {
	var out []verdict
	judge := func(target string, ok bool, measured string, args ...any) {
		st := miss
		if ok {
			st = pass
		}
		out = append(out, verdict{st, target, fmt.Sprintf(measured, args...)})
	}
	skipped := func(target, why string, args ...any) {
		out = append(out, verdict{skip, target, fmt.Sprintf(why, args...)})
	}

	// Claims at N=1,000, on the MetalLB release the targets are set for,
	// judged on what the driver owns: its hops of a claim against MetalLB's
	// answer, and the claims per second of the latest recorded run on this
	// machine. The claim's latency and its requests beside a plain
	// Service's are set by the core (BENCHMARKS.md: the real core's stamp
	// and bind take the claim's time) and are reported, not judged.
	claimTargets := []string{
		"claim -> Bound, N=1000: the driver's hops (drawn, recorded, Bound) p50 <= MetalLB's answer hop p50",
		fmt.Sprintf("claim -> Bound, N=1000: claims per s >= %.1f (the latest recorded run)", claimRateFloor),
	}
	if o := f.opNamed("claim -> Bound, N=1000"); o == nil {
		for _, t := range claimTargets {
			skipped(t, "no N=1000 claims in this run")
		}
	} else {
		measured, oks := make([]string, 2), make([]bool, 2)
		if hs := SummarizeHops(o.traces, len(ClaimStates)); len(hs) == len(ClaimStates)-1 && hs[2].N > 0 {
			// Hops: 0 stamped, 1 drawn, 2 MetalLB answered, 3 recorded, 4 Bound.
			driver := hs[1].P50 + hs[3].P50 + hs[4].P50
			measured[0] = fmt.Sprintf("%.2fx (%s: drawn %s, recorded %s, Bound %s; MetalLB answered %s)", Ratio(Ms(driver), Ms(hs[2].P50)),
				fmtD(driver), fmtD(hs[1].P50), fmtD(hs[3].P50), fmtD(hs[4].P50), fmtD(hs[2].P50))
			oks[0] = driver <= hs[2].P50
		} else {
			measured[0] = "no hops traced"
		}
		measured[1] = fmt.Sprintf("%s claims/s (plain %s Services/s)", rate(o), rate(o.base))
		oks[1] = o.rate() >= claimRateFloor
		for i, t := range claimTargets {
			if f.metallb != targetMetalLB {
				skipped(t, "%s; set for MetalLB %s, this run used %q", measured[i], targetMetalLB, f.metallb)
				continue
			}
			judge(t+" (MetalLB "+targetMetalLB+")", oks[i], "%s", measured[i])
		}
	}

	// The driver's CPU per claim against MetalLB's, N=1,000, and its growth
	// to N=5,000.
	const cpuTarget = "claim -> Bound, N=1000: the driver's CPU per claim <= MetalLB's"
	if o := f.opNamed("claim -> Bound, N=1000"); o == nil {
		skipped(cpuTarget, "no N=1000 claims in this run")
	} else {
		d, m := driverCPUPerOp(o), procCPUPerOp(o, "metallb")
		watching := ""
		if w := watchingPerOp(o); w > 0 {
			watching = fmt.Sprintf("; watching alone %s, %.2fx MetalLB", fmtCPU(w), Ratio(Ms(w), Ms(m)))
		}
		judge(cpuTarget, d <= m, "%.2fx (%s per claim, MetalLB %s; %s%s)", Ratio(Ms(d), Ms(m)), fmtCPU(d), fmtCPU(m), cpuPerController(o), watching)
	}
	const cpuFlat = "the driver's CPU per claim at N=5000 within 20% of N=1000"
	if a, z := f.opNamed("claim -> Bound, N=1000"), f.opNamed("claim -> Bound, N=5000"); a == nil || z == nil {
		skipped(cpuFlat, "large scale only (BENCH_SCALE=large)")
	} else {
		r := Ratio(Ms(driverCPUPerOp(z)), Ms(driverCPUPerOp(a)))
		judge(cpuFlat, r <= 1.2, "%.2fx (%s, %s per claim)", r, fmtCPU(driverCPUPerOp(z)), fmtCPU(driverCPUPerOp(a)))
	}

	// Writes per handoff: four, and one Event.
	const writesTarget = "driver writes per handoff <= 4, plus one Event"
	if hs := append(f.opsWith(" attach, "), f.opsWith(" detach, ")...); len(hs) == 0 {
		skipped(writesTarget, "no handoff in this run")
	} else {
		var worstW, worstE float64
		var byW, byE string
		for _, o := range hs {
			w, ev := (o.cost.driverWrites-o.cost.driverEvents)/float64(o.n), o.cost.driverEvents/float64(o.n)
			if w > worstW || byW == "" {
				worstW, byW = w, o.name
			}
			if ev > worstE || byE == "" {
				worstE, byE = ev, o.name
			}
		}
		judge(writesTarget, worstW <= 4 && worstE <= 1, "writes besides Events: worst %.1f (%s); Events: worst %.1f (%s)", worstW, byW, worstE, byE)
	}

	// 30 attaches at once among 1,121 Services.
	if xs := f.opsWith(" attach, 30 at once, 1000 background"); len(xs) == 0 {
		skipped("30 at once, 1121 Services: p95 <= 3x plain re-pin p95", "no attach with 1000 background Services in this run")
	} else {
		for _, o := range xs {
			r := Ratio(Ms(o.lat.P95), Ms(o.base.lat.P95))
			judge(fmt.Sprintf("30 at once, %d Services: p95 <= 3x plain re-pin p95 (%s)", servicesIn(o.name), kind(o)), r <= 3,
				"%.2fx (%s, re-pin %s)", r, fmtD(o.lat.P95), fmtD(o.base.lat.P95))
		}
	}

	// One handoff at a time on an idle cluster.
	if xs := f.opsWith(", one at a time, idle"); len(xs) == 0 {
		skipped("one handoff at a time, idle: p50 <= 3x idle re-pin p50", "no single handoff in this run")
	} else {
		for _, o := range xs {
			r := Ratio(Ms(o.lat.P50), Ms(o.base.lat.P50))
			judge(fmt.Sprintf("one at a time, idle: p50 <= 3x idle re-pin p50 (%s)", kind(o)), r <= 3,
				"%.2fx (%s, re-pin %s)", r, fmtD(o.lat.P50), fmtD(o.base.lat.P50))
		}
	}

	// Handoff p50 flat from the fewest to the most Services.
	if bgs := f.backgrounds(); len(bgs) < 2 {
		skipped("handoff p50 within 20% from 221 to 5121 Services", "needs two background sizes; this run had %d", len(bgs))
	} else {
		lo, hi := bgs[0], bgs[len(bgs)-1]
		note := ""
		if hi < 5000 {
			note = "; 5121 Services with BENCH_SCALE=large"
		}
		for _, k := range []string{"shared", "gap"} {
			for _, dir := range []string{"attach", "detach"} {
				a := f.opsWith(fmt.Sprintf("%s %s, 30 at once, %d background ", k, dir, lo))
				z := f.opsWith(fmt.Sprintf("%s %s, 30 at once, %d background ", k, dir, hi))
				if len(a) == 0 || len(z) == 0 {
					continue
				}
				r := Ratio(Ms(z[0].lat.P50), Ms(a[0].lat.P50))
				judge(fmt.Sprintf("handoff p50 within 20%% from %d to %d Services (%s %s)", servicesIn(a[0].name), servicesIn(z[0].name), k, dir),
					r >= 0.8 && r <= 1.2, "%.3fx (%s, %s)%s", r, fmtD(z[0].lat.P50), fmtD(a[0].lat.P50), note)
			}
		}
	}

	// The service and ipaddress controllers' CPU per attach, flat from the
	// fewest to the most Services.
	if bgs := f.backgrounds(); len(bgs) < 2 || bgs[len(bgs)-1] < 5000 {
		skipped("the service and ipaddress controllers' CPU per attach within 20% from 1121 Services up", "large scale only (BENCH_SCALE=large or xl)")
	} else {
		lo, hi := 1000, bgs[len(bgs)-1]
		perAttach := func(o *op) time.Duration { return procCPUPerOp(o, "service") + procCPUPerOp(o, "ipaddress") }
		for _, k := range []string{"shared", "gap"} {
			a := f.opsWith(fmt.Sprintf("%s attach, 30 at once, %d background ", k, lo))
			z := f.opsWith(fmt.Sprintf("%s attach, 30 at once, %d background ", k, hi))
			if len(a) == 0 || len(z) == 0 {
				continue
			}
			r := Ratio(Ms(perAttach(z[0])), Ms(perAttach(a[0])))
			judge(fmt.Sprintf("the service and ipaddress controllers' CPU per attach within 20%% from %d to %d Services (%s attach)",
				servicesIn(a[0].name), servicesIn(z[0].name), k), r <= 1.2, "%.2fx (%s, %s)", r, fmtD(perAttach(z[0])), fmtD(perAttach(a[0])))
		}
	}

	// Per-claim cost at N=5,000 against N=1,000.
	const costTarget = "API requests per claim at N=5000 within 20% of N=1000"
	a, z := f.opNamed("claim -> Bound, N=1000"), f.opNamed("claim -> Bound, N=5000")
	if a == nil || z == nil {
		skipped(costTarget, "large scale only (BENCH_SCALE=large)")
	} else {
		r := Ratio(apiPerOp(z), apiPerOp(a))
		judge(costTarget, r >= 0.8 && r <= 1.2, "%.3fx (%.1f, %.1f)", r, apiPerOp(z), apiPerOp(a))
	}

	// The warm burst.
	const warmTarget = "warm burst: claim -> Bound p50 <= 2x the plain burst p50"
	if ws := f.opsWith("claim -> Bound, warm"); len(ws) == 0 {
		skipped(warmTarget, "no warm burst in this run")
	} else {
		o := ws[0]
		r := Ratio(Ms(o.lat.P50), Ms(o.base.lat.P50))
		judge(warmTarget, r <= 2, "%.2fx (%s, plain %s, N=%d)", r, fmtD(o.lat.P50), fmtD(o.base.lat.P50), o.n)
	}

	// The claim controller's memory.
	const rssTarget = "claim controller RSS <= 64 MiB at N=1000"
	if m, ok := f.rssAt[1000]["claim"]; !ok {
		skipped(rssTarget, "no N=1000 claims in this run")
	} else {
		judge(rssTarget, m.RSS <= 64<<20, "%s (%s anonymous, %s file-backed)", MiB(m.RSS), MiB(m.Anon), MiB(m.File))
	}
	const rssLarge = "each controller's RSS <= 80 MiB at N=5000"
	if at, ok := f.rssAt[5000]; !ok {
		skipped(rssLarge, "large scale only (BENCH_SCALE=large)")
	} else {
		worst, parts := 0.0, []string{}
		for _, ctl := range cluster.Controllers {
			worst = max(worst, at[ctl].RSS)
			parts = append(parts, fmt.Sprintf("%s %s", ctl, MiB(at[ctl].RSS)))
		}
		judge(rssLarge, worst <= 80<<20, "%s%s", strings.Join(parts, ", "), driverEnvNote())
	}

	// Standing targets.
	passes, attaches := 0, 0
	for _, o := range f.opsWith(" attach, ") {
		passes += o.cost.metallb.FullPasses
		attaches += o.n
	}
	if attaches == 0 {
		skipped("attaches cause no MetalLB full pass", "no attach in this run")
	} else {
		judge("attaches cause no MetalLB full pass", passes == 0, "%d full passes in %d attaches", passes, attaches)
	}
	if ds := f.opsWith(" detach, ", " at once, "); len(ds) > 0 {
		worst, by := -1.0, ""
		for _, o := range ds {
			if p := float64(o.cost.metallb.FullPasses) / float64(o.n); p > worst {
				worst, by = p, o.name
			}
		}
		judge("detaches at once: at most one MetalLB full pass each", worst <= 1, "worst %.2f per detach (%s)", worst, by)
	}
	if cs := f.opsWith("claim -> Bound, "); len(cs) > 0 {
		worst, by := -1.0, ""
		for _, o := range cs {
			if w := o.cost.driverWrites / float64(o.n); w > worst {
				worst, by = w, o.name
			}
		}
		judge("driver writes <= 6 per claim", worst <= 6, "worst %.1f (%s)", worst, by)
	}
	if len(f.restarts) > 0 {
		var slowest time.Duration
		var writes float64
		for _, r := range f.restarts {
			slowest = max(slowest, r.converge)
			writes += ResyncWrites(r.cost.reqs)
		}
		judge("restart converges in <= 10s with zero writes", slowest <= 10*time.Second && writes == 0,
			"slowest %s, %.0f writes in all", fmtD(slowest), writes)
	}
	const budget = "the default run within 15 minutes (this process; the build before it not counted)"
	if f.whole {
		judge(budget, f.total <= 15*time.Minute, "%s", fmtD(f.total.Round(time.Second)))
	} else {
		skipped(budget, "%s; judged only on a default-scale run of every benchmark", fmtD(f.total.Round(time.Second)))
	}
	return out
}

// renderVerdicts prints one line per target: PASS, MISS or SKIP, the
// target and the figure it was judged on, and a count of each.
func renderVerdicts(vs []verdict) string {
	rows := [][]string{{"", "TARGET", "MEASURED"}}
	count := map[string]int{}
	for _, v := range vs {
		rows = append(rows, []string{v.state, v.target, v.measured})
		count[v.state]++
	}
	return table(fmt.Sprintf("Targets (this run's figures): %d PASS, %d MISS, %d SKIP (not measured by this run)",
		count[pass], count[miss], count[skip]), rows)
}

// procCPUPerOp is the CPU one process spent per item of o.
func procCPUPerOp(o *op, proc string) time.Duration {
	return o.cost.cpu[proc] / time.Duration(max(o.n, 1))
}

// driverCPUPerOp is the CPU the driver's controllers spent together per
// item of o.
func driverCPUPerOp(o *op) time.Duration {
	var d time.Duration
	for _, c := range cluster.Controllers {
		d += procCPUPerOp(o, c)
	}
	return d
}

// fmtCPU formats CPU time per item to a tenth of a millisecond: a
// controller spends a few milliseconds per claim, which whole milliseconds
// blur.
func fmtCPU(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }

// cpuPerController names each controller's CPU per item of o.
func cpuPerController(o *op) string {
	var out []string
	for _, c := range cluster.Controllers {
		out = append(out, fmt.Sprintf("%s %s", c, fmtCPU(procCPUPerOp(o, c))))
	}
	return strings.Join(out, ", ")
}
