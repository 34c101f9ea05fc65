package bench

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestPercentile(t *testing.T) {
	ten := []time.Duration{ms(1), ms(2), ms(3), ms(4), ms(5), ms(6), ms(7), ms(8), ms(9), ms(10)}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", []time.Duration{ms(7)}, 95, ms(7)},
		{"median of ten", ten, 50, ms(5)},
		{"p95 of ten", ten, 95, ms(10)},
		{"p90 of ten", ten, 90, ms(9)},
		{"p100 is the max", ten, 100, ms(10)},
		{"tiny p is the min", ten, 0.1, ms(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Percentile(tc.sorted, tc.p))
		})
	}
}

func TestSummarize(t *testing.T) {
	in := []time.Duration{ms(30), ms(10), ms(20), ms(40)}
	s := Summarize(in)
	assert.Equal(t, Summary{N: 4, Min: ms(10), P50: ms(20), P95: ms(40), Max: ms(40), Mean: ms(25)}, s)
	assert.Equal(t, []time.Duration{ms(30), ms(10), ms(20), ms(40)}, in, "the input is not reordered")
	assert.Equal(t, Summary{}, Summarize(nil))
}

func TestRatio(t *testing.T) {
	assert.InDelta(t, 2.5, Ratio(5, 2), 1e-9)
	assert.True(t, math.IsNaN(Ratio(1, 0)))
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 1.2345e+07
metallb_iad_handoff_seconds_bucket{le="0.005"} 0
metallb_iad_handoff_seconds_bucket{le="+Inf"} 30
metallb_iad_handoff_seconds_sum 4.5
metallb_iad_handoff_seconds_count 30
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 12
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 8
rest_client_requests_total_other 99
label_with_space{reason="a b"} 3 1700000000000
broken_sample abc
`
	m := ParseMetrics(text)
	assert.InDelta(t, 12345000, m["go_memstats_heap_inuse_bytes"], 1e-6)
	assert.InDelta(t, 4.5, m["metallb_iad_handoff_seconds_sum"], 1e-9)
	assert.InDelta(t, 30, m[`metallb_iad_handoff_seconds_bucket{le="+Inf"}`], 1e-9)
	assert.InDelta(t, 20, m.Sum("rest_client_requests_total"), 1e-9, "labelled series add up; a longer name is another metric")
	assert.InDelta(t, 3, m[`label_with_space{reason="a b"}`], 1e-9, "a timestamp after the value is ignored")
	assert.NotContains(t, m, "broken_sample")
	assert.Zero(t, m.Sum("absent_metric"))
}

func TestParseProcStatus(t *testing.T) {
	status := "Name:\tclaim\nVmPeak:\t 1300000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nThreads:\t9\n"
	pm, err := ParseProcStatus(status)
	require.NoError(t, err)
	assert.Equal(t, ProcMem{RSS: 40960 * 1024, HWM: 51200 * 1024}, pm, "an older kernel: no RssAnon or RssFile")

	pm, err = ParseProcStatus(status + "RssAnon:\t   12288 kB\nRssFile:\t   28672 kB\nRssShmem:\t0 kB\n")
	require.NoError(t, err)
	assert.Equal(t, ProcMem{RSS: 40960 * 1024, HWM: 51200 * 1024, Anon: 12288 * 1024, File: 28672 * 1024}, pm)

	_, err = ParseProcStatus("Name:\tclaim\nVmRSS:\t 40960 kB\n")
	assert.ErrorContains(t, err, "VmRSS or VmHWM missing")

	_, err = ParseProcStatus("VmHWM:\t 1 MB\nVmRSS:\t 1 kB\n")
	assert.ErrorContains(t, err, `unexpected VmHWM line`)
}

func TestParseProcStat(t *testing.T) {
	stat := "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 75 3 4 20 0 9 0 12345 1000000 500 18446744073709551615\n"
	cpu, err := ParseProcStat(stat)
	require.NoError(t, err)
	assert.Equal(t, 3250*time.Millisecond, cpu, "utime 250 + stime 75 ticks of 10 ms; children's times not counted")

	_, err = ParseProcStat("4242 no parenthesis")
	assert.ErrorContains(t, err, "malformed")
	_, err = ParseProcStat("4242 (x) S 1 2")
	assert.ErrorContains(t, err, "fields after the name")
}

func TestParseMachineStat(t *testing.T) {
	m, err := ParseMachineStat("cpu  100 5 45 800 50 0 0 0 7 0\ncpu0 50 2 20 400 25 0 0 0 0 0\n")
	require.NoError(t, err)
	assert.Equal(t, MachineCPU{Busy: 1500 * time.Millisecond, Total: 10 * time.Second}, m)

	_, err = ParseMachineStat("intr 1 2 3\n")
	assert.ErrorContains(t, err, "no aggregate cpu line")
}

func TestParseSeries(t *testing.T) {
	name, l := ParseSeries(`apiserver_request_total{code="409",resource="services",subresource="status",verb="PUT",x="a\"b,c"}`)
	assert.Equal(t, "apiserver_request_total", name)
	assert.Equal(t, map[string]string{"code": "409", "resource": "services", "subresource": "status", "verb": "PUT", "x": `a"b,c`}, l)
	name, l = ParseSeries("up")
	assert.Equal(t, "up", name)
	assert.Empty(t, l)
}

func TestAPIRequests(t *testing.T) {
	before := Metrics{
		`apiserver_request_total{code="200",resource="services",subresource="",verb="PATCH"}`:     10,
		`apiserver_request_total{code="200",resource="services",subresource="status",verb="PUT"}`: 5,
	}
	after := Metrics{
		`apiserver_request_total{code="200",resource="services",subresource="",verb="PATCH"}`:     14,
		`apiserver_request_total{code="200",resource="services",subresource="status",verb="PUT"}`: 8,
		`apiserver_request_total{code="409",resource="services",subresource="status",verb="PUT"}`: 2,
		`apiserver_request_total{code="201",resource="ipaddresses",subresource="",verb="POST"}`:   3,
		`apiserver_request_total{code="200",resource="leases",subresource="",verb="PUT"}`:         6,
		`apiserver_request_total{code="200",resource="services",subresource="",verb="WATCH"}`:     9,
		`apiserver_request_total{code="200",resource="services",subresource="",verb="LIST"}`:      1,
		`rest_client_requests_total{code="200",method="GET"}`:                                     100,
	}
	reqs := APIRequests(before, after)
	assert.Equal(t, map[Request]float64{
		"PATCH services": 4, "PUT services/status": 5, "POST ipaddresses": 3, "PUT leases": 6, "LIST services": 1,
	}, reqs, "WATCH is left out; 409s count as requests")
	assert.Equal(t, map[Request]float64{"PUT services/status": 2}, APIRequestsWithCode(before, after, "409"))
	assert.InDelta(t, 12, Writes(reqs, "leases"), 1e-9)
	assert.InDelta(t, 18, Writes(reqs), 1e-9)
	assert.InDelta(t, 13, Total(reqs, "leases"), 1e-9)
	assert.Equal(t, "PUT services/status 2.5, PATCH services 2.0, POST ipaddresses 1.5, LIST services 0.5", PerOp(reqs, 2, "leases"))
	assert.Equal(t, "-", PerOp(nil, 2))
}

func TestDriverWrites(t *testing.T) {
	before := map[string]Metrics{"claim": {`rest_client_requests_total{code="201",host="h",method="POST"}`: 2}}
	after := map[string]Metrics{
		"claim":   {`rest_client_requests_total{code="201",host="h",method="POST"}`: 7, `rest_client_requests_total{code="200",host="h",method="GET"}`: 50},
		"service": {`rest_client_requests_total{code="200",host="h",method="PATCH"}`: 4, `rest_client_requests_total{code="200",host="h",method="PUT"}`: 3},
	}
	assert.InDelta(t, 9, DriverWrites(before, after, 3), 1e-9, "5 POST + 4 PATCH + 3 PUT - 3 lease renewals")
	assert.Zero(t, DriverWrites(before, before, 3), "never negative")
}

func TestWritesByController(t *testing.T) {
	before := map[string]Metrics{"claim": {`rest_client_requests_total{code="201",host="h",method="POST"}`: 2}}
	after := map[string]Metrics{
		"claim": {`rest_client_requests_total{code="201",host="h",method="POST"}`: 7, `rest_client_requests_total{code="409",host="h",method="POST"}`: 1,
			`rest_client_requests_total{code="200",host="h",method="GET"}`: 50},
		"service": {`rest_client_requests_total{code="200",host="h",method="PATCH"}`: 4, `rest_client_requests_total{code="200",host="h",method="PUT"}`: 3,
			`rest_client_requests_total{code="200",host="h",method="DELETE"}`: 1},
	}
	assert.Equal(t, map[string]map[string]float64{
		"claim":   {"POST": 6},
		"service": {"PATCH": 4, "DELETE": 1},
	}, WritesByController(before, after), "writes by verb, every answer code, lease PUTs left out")
	assert.Equal(t, "claim: POST 3.0; service: PATCH 2.0 DELETE 0.5", writesCol(WritesByController(before, after), 2))
	assert.Equal(t, "-", writesCol(nil, 1))
}

func TestPassesByController(t *testing.T) {
	before := map[string]Metrics{"claim": {`controller_runtime_reconcile_total{controller="claim",result="success"}`: 10}}
	after := map[string]Metrics{
		"claim": {`controller_runtime_reconcile_total{controller="claim",result="success"}`: 30, `controller_runtime_reconcile_total{controller="claim",result="requeue_after"}`: 4,
			`controller_runtime_reconcile_total{controller="claim-placeholder-gc",result="success"}`: 6, `controller_runtime_reconcile_errors_total{controller="claim"}`: 9},
		"service": {`controller_runtime_reconcile_total{controller="service",result="success"}`: 0},
	}
	passes := PassesByController(before, after)
	assert.Equal(t, map[string]float64{"claim/claim": 24, "claim/claim-placeholder-gc": 6}, passes, "every result, by controller; errors are another metric")
	assert.Equal(t, "0.0/15.0/0.0/0.0", passesCol(passes, 2), "per process, in cluster.Controllers order")
	assert.Equal(t, "claim 12.0, claim-placeholder-gc 3.0", passesByCol(passes, 2))
	assert.Equal(t, "-", passesByCol(nil, 1))
}

func TestCountMetalLBLog(t *testing.T) {
	log := `{"caller":"service_controller.go:64","controller":"ServiceReconciler","level":"info","start reconcile":"ns/a","ts":"x"}
{"caller":"pool_status_controller.go:53","controller":"PoolStatusReconciler","level":"info","start reconcile":"metallb-system/p","ts":"x"}
{"caller":"service_controller.go:107","controller":"ServiceReconciler","event":"force service reload","level":"info","ts":"x"}
{"caller":"service_controller.go:65","controller":"ServiceReconciler","end reconcile":"ns/a","level":"info","ts":"x"}
{"caller":"service_controller_reload.go:63","controller":"ServiceReconciler - reprocessAll","level":"info","start reconcile":"metallbreload/reload","ts":"x"}
{"caller":"main.go:133","error":"Operation cannot be fulfilled on services \"p\": the object has been modified; please apply your changes to the latest version and try again","level":"error","msg":"failed to update service","op":"updateServiceStatus","ts":"x"}
{"caller":"main.go:133","error":"Timeout","level":"error","msg":"failed to update service","op":"updateServiceStatus","ts":"x"}
{"caller":"service_controller_reload.go:113","controller":"ServiceReconciler - reprocessAll","event":"force service reload","level":"info","ts":"x"}
{"caller":"service_controller_reload.go:107","controller":"ServiceReconciler - reprocessAll","event":"failed to handle service, no retry","level":"error","name":"ns/a","ts":"x"}
{"caller":"service_controller_reload.go:63","controller":"ServiceReconciler - reprocessAll","level":"info","start reconcile":"metallbreload/reload","ts":"x"}
`
	assert.Equal(t, MetalLBLog{Reconciles: 1, FullPasses: 2, ForcedReloads: 1, FailedPasses: 1, HandleFailures: 1, UpdateFailures: 2, Conflicts: 1}, CountMetalLBLog(log))
}

func TestResyncWrites(t *testing.T) {
	reqs := map[Request]float64{
		"PUT services/status": 101, "PUT ipaddresspools/status": 3, "POST events": 1, "PUT leases": 4,
		"PATCH ipaddresses/status": 2, "GET /api": 1,
	}
	assert.InDelta(t, 2, ResyncWrites(reqs), 1e-9, "only the driver's writes")
	assert.InDelta(t, 104, MetalLBWrites(reqs), 1e-9, "Service and pool status")
}

func TestPassClock(t *testing.T) {
	line := func(what, ts string) string {
		return `{"caller":"service_controller_reload.go:63","controller":"ServiceReconciler - reprocessAll","level":"info","` +
			what + `":"metallbreload/reload","ts":"` + ts + `"}` + "\n"
	}
	var p PassClock
	// An end without its start (the pass began before the log was read) is
	// not counted; a single-Service reconcile is not a pass.
	p.Read(line("end reconcile", "2026-12-01T10:00:00Z") +
		`{"controller":"ServiceReconciler","level":"info","start reconcile":"ns/a","ts":"2026-12-01T10:00:01Z"}` + "\n" +
		line("start reconcile", "2026-12-01T10:00:02Z"))
	assert.Equal(t, PassClock{started: time.Date(2026, 12, 1, 10, 0, 2, 0, time.UTC)}, p)
	// The pass ends in the next piece; the one after it starts and ends there.
	p.Read(line("end reconcile", "2026-12-01T10:00:58Z") +
		line("start reconcile", "2026-12-01T10:01:00Z") + line("end reconcile", "2026-12-01T10:01:03Z"))
	assert.Equal(t, 2, p.Passes)
	assert.Equal(t, 59*time.Second, p.Time)
	assert.True(t, p.started.IsZero())
	// A line without a time changes nothing.
	p.Read(`{"controller":"ServiceReconciler - reprocessAll","start reconcile":"metallbreload/reload"}` + "\n")
	assert.True(t, p.started.IsZero())
}

// TestAllBenchmarksListed keeps allBenchmarks, which decides whether a run
// is whole enough to be judged against the budget, in step with the
// package's Benchmark functions.
func TestAllBenchmarksListed(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	var found []string
	for _, f := range files {
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Benchmark") {
				found = append(found, strings.TrimPrefix(fn.Name.Name, "Benchmark"))
			}
		}
	}
	assert.ElementsMatch(t, append(slices.Clone(allBenchmarks), standaloneBenchmarks...), found)
}

func TestVerdicts(t *testing.T) {
	lat := func(p50, p95 time.Duration) Summary { return Summary{P50: p50, P95: p95, Max: p95} }
	// A run's operations, as the benchmarks record them.
	plain := &op{name: "plain Service -> IP, N=1000", n: 1000, total: 10 * time.Second, lat: lat(2*time.Second, 3*time.Second)}
	claims := func(reqsPerClaim float64, n int, total time.Duration) *op {
		o := &op{name: fmt.Sprintf("claim -> Bound, N=%d", n), n: n, total: total, lat: lat(5*time.Second, 8*time.Second), base: plain}
		o.cost.reqs = map[Request]float64{"POST ipaddressclaims": reqsPerClaim * float64(n), "PUT leases": 999}
		o.cost.driverWrites = 6 * float64(n)
		// 8 ms of the driver's CPU per claim (claim 5 ms), 4 ms of MetalLB's.
		perClaim := func(ms int) time.Duration { return time.Duration(ms*n) * time.Millisecond }
		o.cost.cpu = map[string]time.Duration{"class": perClaim(1), "claim": perClaim(5), "service": perClaim(1), "ipaddress": perClaim(1), "metallb": perClaim(4)}
		// Each claim: stamped after 1 s, drawn 500 ms later, MetalLB's
		// answer 2 s later, recorded and Bound 100 ms each.
		o.states = ClaimStates
		t0 := time.Unix(0, 0)
		for range n {
			at := []time.Time{t0}
			for _, d := range []time.Duration{time.Second, 500 * time.Millisecond, 2 * time.Second, 100 * time.Millisecond, 100 * time.Millisecond} {
				at = append(at, at[len(at)-1].Add(d))
			}
			o.traces = append(o.traces, at)
		}
		return o
	}
	idle := &op{name: "plain re-pin, one at a time, idle (5 Services)", n: 5, lat: lat(10*time.Millisecond, 12*time.Millisecond)}
	// handoff is a handoff row: writes are the driver's per handoff,
	// Events included, events its Events per handoff.
	handoff := func(name string, n int, l Summary, base *op, writes, events, driver409 float64) *op {
		o := &op{name: name, n: n, lat: l, base: base}
		o.cost.driverWrites, o.cost.driverEvents = writes*float64(n), events*float64(n)
		o.cost.conflictsBy = map[string]float64{WriterDriver: driver409}
		return o
	}
	// withCPU gives a handoff row the service and ipaddress controllers'
	// CPU per handoff, in ms.
	withCPU := func(o *op, service, ipaddress int) *op {
		o.cost.cpu = map[string]time.Duration{"service": time.Duration(service*o.n) * time.Millisecond, "ipaddress": time.Duration(ipaddress*o.n) * time.Millisecond}
		return o
	}
	repin := func(bg, svcs int) *op {
		return &op{name: fmt.Sprintf("plain re-pin, 30 at once, %d background (%d Services)", bg, svcs), n: 30, lat: lat(90*time.Millisecond, 100*time.Millisecond)}
	}
	r100, r1000, r5000 := repin(100, 221), repin(1000, 1121), repin(5000, 5121)
	defaultRun := []*op{
		plain, claims(18, 1000, 16*time.Second), idle,
		handoff("shared attach, one at a time, idle (5 Services)", 5, lat(25*time.Millisecond, 30*time.Millisecond), idle, 4, 1, 0),
		handoff("gap attach, one at a time, idle (5 Services)", 5, lat(40*time.Millisecond, 50*time.Millisecond), idle, 6, 1, 0),
		r100, handoff("shared attach, 30 at once, 100 background (221 Services)", 30, lat(time.Second, 1200*time.Millisecond), r100, 4, 1, 0),
		handoff("shared detach, 30 at once, 100 background (221 Services)", 30, lat(time.Second, 1200*time.Millisecond), r100, 3, 1, 2),
		r1000, handoff("shared attach, 30 at once, 1000 background (1121 Services)", 30, lat(1100*time.Millisecond, 250*time.Millisecond), r1000, 4, 1, 0),
		handoff("shared detach, 30 at once, 1000 background (1121 Services)", 30, lat(1500*time.Millisecond, 2*time.Second), r1000, 3, 1, 0),
	}
	rss := map[int]map[string]ProcMem{1000: {"claim": {RSS: 60 << 20}}}
	for _, tc := range []struct {
		name string
		f    runFigures
		// want is the state of every target whose name holds the key.
		want map[string]string
		// measured is the figure printed for the targets whose name holds the key.
		measured map[string]string
	}{
		{
			name: "a default run on the MetalLB the claim targets are set for",
			f:    runFigures{ops: defaultRun, metallb: "v0.16.1", rssAt: rss, total: 9 * time.Minute, whole: true},
			want: map[string]string{
				"the driver's hops (drawn, recorded, Bound) p50":           pass, // 700 ms against 2 s
				"N=1000: claims per s >= 18.7":                             pass, // 62.5/s
				"N=1000: p50 <= 3x plain":                                  "",   // set by the core: not judged
				"API requests per claim <= 15":                             "",
				"driver writes per handoff <= 4, plus one Event":           miss, // gap attach: 5 besides its Event
				"30 at once, 1121 Services: p95 <= 3x plain re-pin p95":    pass, // 2.5x
				"one at a time, idle: p50 <= 3x idle re-pin p50 (shared":   pass,
				"one at a time, idle: p50 <= 3x idle re-pin p50 (gap":      miss,
				"detaches: 0 MetalLB status 409s":                          "",   // set by MetalLB: not judged
				"from 221 to 1121 Services (shared attach)":                pass, // 1.10x
				"from 221 to 1121 Services (shared detach)":                miss, // 1.50x
				"API requests per claim at N=5000":                         skip,
				"the driver's CPU per claim <= MetalLB's":                  miss, // 8 ms against 4 ms
				"the driver's CPU per claim at N=5000":                     skip,
				"warm burst":                                               skip,
				"claim controller RSS <= 64 MiB at N=1000":                 pass,
				"each controller's RSS <= 80 MiB at N=5000":                skip,
				"CPU per attach within 20% from 1121 Services up":          skip,
				"attaches cause no MetalLB full pass":                      pass,
				"detaches at once: at most one MetalLB full pass each":     pass,
				"driver writes <= 6 per claim":                             pass,
				"the default run within 15 minutes":                        pass,
				"from 221 to 1121 Services (gap":                           "", // not run: no line
				"30 at once, 1121 Services: p95 <= 3x plain re-pin p95 (g": "",
			},
			measured: map[string]string{
				"the driver's hops":                       "0.35x (700ms: drawn 500ms, recorded 100ms, Bound 100ms; MetalLB answered 2s)",
				"claims per s":                            "62.5 claims/s (plain 100.0 Services/s)",
				"driver writes per handoff":               "writes besides Events: worst 5.0 (gap attach, one at a time, idle (5 Services)); Events: worst 1.0 (shared attach, one at a time, idle (5 Services))",
				"from 221 to 1121 Services (shared at":    "1.100x (1.1s, 1s); 5121 Services with BENCH_SCALE=large",
				"the driver's CPU per claim <= MetalLB's": "2.00x (8ms per claim, MetalLB 4ms; class 1ms, claim 5ms, service 1ms, ipaddress 1ms)",
			},
		},
		{
			name: "another MetalLB: the claim targets are not judged",
			f:    runFigures{ops: defaultRun, metallb: "v0.15.2", rssAt: rss, total: 16 * time.Minute, whole: true},
			want: map[string]string{
				"the driver's hops":                 skip,
				"N=1000: claims per s":              skip,
				"the default run within 15 minutes": miss,
			},
			measured: map[string]string{
				"N=1000: claims per s": `62.5 claims/s (plain 100.0 Services/s); set for MetalLB v0.16.1, this run used "v0.15.2"`,
			},
		},
		{
			name: "a large run: cost and the flat handoff to 5,121 Services",
			f: runFigures{ops: []*op{
				plain, claims(18, 1000, 16*time.Second), claims(19, 5000, 90*time.Second),
				r100, handoff("gap attach, 30 at once, 100 background (221 Services)", 30, lat(time.Second, time.Second), r100, 4, 1, 0),
				r1000, withCPU(handoff("gap attach, 30 at once, 1000 background (1121 Services)", 30, lat(time.Second, time.Second), r1000, 4, 1, 0), 10, 10),
				r5000, withCPU(handoff("gap attach, 30 at once, 5000 background (5121 Services)", 30, lat(850*time.Millisecond, time.Second), r5000, 4, 1, 0), 12, 11),
			}, metallb: "v0.16.1", total: 40 * time.Minute,
				rssAt: map[int]map[string]ProcMem{5000: {"class": {RSS: 40 << 20}, "claim": {RSS: 85 << 20}, "service": {RSS: 70 << 20}, "ipaddress": {RSS: 60 << 20}}}},
			want: map[string]string{
				"each controller's RSS <= 80 MiB at N=5000":                    miss,
				"CPU per attach within 20% from 1121 to 5121 Services (gap":    pass, // 1.15x
				"CPU per attach within 20% from 1121 to 5121 Services (shared": "",   // no shared row: no line
				"API requests per claim at N=5000 within 20% of N=1000":        pass, // 1.06x
				"the driver's CPU per claim at N=5000 within 20% of N=1000":    pass, // 1.00x
				"handoff p50 within 20% from 221 to 5121 Services (gap attach": pass, // 0.85x
				"30 at once, 1121 Services":                                    miss, // 10x the re-pin p95
				"claim controller RSS":                                         skip,
				"the default run within 15 minutes":                            skip,
			},
			measured: map[string]string{
				"from 221 to 5121 Services (gap attach)": "0.850x (850ms, 1s)",
				"each controller's RSS <= 80 MiB":        "class 40.0 MiB, claim 85.0 MiB, service 70.0 MiB, ipaddress 60.0 MiB",
				"CPU per attach within 20%":              "1.15x (23ms, 20ms)",
			},
		},
		{
			name: "nothing measured: every target skipped",
			f:    runFigures{},
			want: map[string]string{
				"N=1000: claims per s": skip, "driver writes per handoff": skip, "p95 <= 3x plain re-pin p95": skip,
				"idle re-pin p50": skip, "status 409s": "", "from 221 to 5121 Services": skip, "N=5000": skip,
				"warm burst": skip, "RSS": skip, "attaches cause no": skip, "within 15 minutes": skip,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := verdicts(tc.f)
			for key, want := range tc.want {
				var got []string
				for _, v := range vs {
					if strings.Contains(v.target, key) {
						got = append(got, v.state)
					}
				}
				if want == "" {
					assert.Empty(t, got, "no line for %q", key)
					continue
				}
				if assert.NotEmpty(t, got, "a line for %q", key) {
					for _, g := range got {
						assert.Equal(t, want, g, key)
					}
				}
			}
			for key, want := range tc.measured {
				found := false
				for _, v := range vs {
					if strings.Contains(v.target, key) {
						found = true
						assert.Equal(t, want, v.measured, key)
					}
				}
				assert.True(t, found, "a line for %q", key)
			}
			out := renderVerdicts(vs)
			assert.Equal(t, len(vs)+3, strings.Count(out, "\n"), "a title, a header and one line per target")
		})
	}
}
