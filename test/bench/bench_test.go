package bench

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// Object states the benchmarks wait for.
func isBound(o client.Object) bool {
	c := o.(*iadv1alpha1.IPAddressClaim)
	return c.Status.Phase == iadv1alpha1.ClaimBound && len(c.Status.Addresses) > 0
}

func isHeld(o client.Object) bool {
	return conditions.IsTrue(o.(*iadv1alpha1.IPAddress).Status.Conditions, conditions.Held)
}

func isHeldAgain(o client.Object) bool {
	a := o.(*iadv1alpha1.IPAddress)
	return a.Status.AssociatedTo == nil && conditions.IsTrue(a.Status.Conditions, conditions.Held)
}

func hasIngress(ip string) func(client.Object) bool {
	return func(o client.Object) bool {
		for _, in := range o.(*corev1.Service).Status.LoadBalancer.Ingress {
			if in.IP == ip {
				return true
			}
		}
		return false
	}
}

func lacksIngress(ip string) func(client.Object) bool {
	has := hasIngress(ip)
	return func(o client.Object) bool { return !has(o) }
}

// table renders rows with aligned columns for b.Log.
func table(title string, rows [][]string) string {
	var sb strings.Builder
	sb.WriteString("\n" + title + "\n")
	tw := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, "  "+strings.Join(r, "\t"))
	}
	_ = tw.Flush()
	return sb.String()
}

func fmtD(d time.Duration) string { return d.Round(time.Millisecond).String() }

// cpuCol formats CPU seconds per process, in cpuProcs order.
func cpuCol(cpu map[string]time.Duration) string {
	var out []string
	for _, p := range cpuProcs {
		out = append(out, fmt.Sprintf("%.1f", cpu[p].Seconds()))
	}
	return strings.Join(out, "/") + " s"
}

// claimRun is what claimMany observed.
type claimRun struct {
	n int
	// total runs from the first create to the last claim Bound and Held.
	total time.Duration
	// bound is create → Bound per claim; ready is create → Bound and Held.
	bound, ready Summary
	// requests is the API requests each controller made during the run.
	requests map[string]float64
	// cpu is the CPU time each process used during the run; busy is the
	// machine's busy share (every process, ours or not).
	cpu  map[string]time.Duration
	busy float64
}

func (r claimRun) rate() float64 { return float64(r.n) / r.total.Seconds() }

// claimMany creates n IPv4 claims of class in namespace at once (prefix-0,
// prefix-1, ...) and waits until every one is Bound and its address Held.
func (e *env) claimMany(b *testing.B, namespace, class, prefix string, n int) claimRun {
	b.Helper()
	before := e.scrapeAll(b)
	cpu0 := e.cpu(b)
	bound := make([]*expectation, n)
	held := make([]*expectation, n)
	starts := make([]time.Time, n)
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		bound[i] = e.w.expect(claimKey(namespace, name), isBound)
		held[i] = e.w.expect(addressOfKey(namespace, name), isHeld)
	}
	t0 := time.Now()
	require.NoError(b, parallel(n, 16, func(i int) error {
		starts[i] = time.Now()
		return e.k.Create(e.ctx, &iadv1alpha1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("%s-%d", prefix, i)},
			Spec:       iadv1alpha1.IPAddressClaimSpec{ClassName: class, Family: iadv1alpha1.FamilyIPv4},
		})
	}), "create claims")
	require.NoError(b, e.w.awaitAll(e.ctx, append(append([]*expectation{}, bound...), held...), converge),
		"claims Bound and Held")
	run := claimRun{n: n, requests: map[string]float64{}}
	var boundLat, readyLat []time.Duration
	var last time.Time
	for i := range n {
		ready := bound[i].At()
		if h := held[i].At(); h.After(ready) {
			ready = h
		}
		if ready.After(last) {
			last = ready
		}
		boundLat = append(boundLat, bound[i].At().Sub(starts[i]))
		readyLat = append(readyLat, ready.Sub(starts[i]))
	}
	run.total = last.Sub(t0)
	run.bound, run.ready = Summarize(boundLat), Summarize(readyLat)
	run.cpu, run.busy = e.cpu(b).since(cpu0)
	after := e.scrapeAll(b)
	for _, c := range cluster.Controllers {
		run.requests[c] = after[c].Sum("rest_client_requests_total") - before[c].Sum("rest_client_requests_total")
	}
	return run
}

// BenchmarkClaimToBound creates N claims at once and measures how long each
// takes from creation to Bound (the core's verdict) and to Bound and Held
// (a placeholder keeps the address in MetalLB's books), the throughput, and
// how both scale from N=50 to N=200.
func BenchmarkClaimToBound(b *testing.B) {
	e := setup(b)
	runs := map[int]claimRun{}
	sizes := []int{50, 200}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var r claimRun
			for i := range b.N {
				b.StopTimer()
				ns, class := e.newClass(b, fmt.Sprintf("bound-%d-%d", n, i))
				b.StartTimer()
				r = e.claimMany(b, ns, class, "ip", n)
			}
			runs[n] = r
			b.ReportMetric(r.rate(), "claims/s")
			b.ReportMetric(Ms(r.bound.P50), "bound_p50_ms")
			b.ReportMetric(Ms(r.bound.P95), "bound_p95_ms")
			b.ReportMetric(Ms(r.bound.Max), "bound_max_ms")
			b.ReportMetric(Ms(r.ready.P95), "held_p95_ms")
			if base, ok := runs[sizes[0]]; ok && n != sizes[0] {
				b.ReportMetric(Ratio(r.total.Seconds(), base.total.Seconds()), "total_x_vs_N50")
				b.ReportMetric(Ratio(r.total.Seconds()/float64(n), base.total.Seconds()/float64(base.n)), "per_claim_x_vs_N50")
			}
		})
	}
	rows := [][]string{{"N", "TOTAL", "CLAIMS/S", "BOUND P50", "P95", "MAX", "BOUND+HELD P50", "P95", "MAX", "API REQ/CLAIM class/claim/service/ipaddress", "CPU " + strings.Join(cpuProcs, "/"), "MACHINE BUSY"}}
	for _, n := range sizes {
		r, ok := runs[n]
		if !ok {
			continue
		}
		var req []string
		for _, c := range cluster.Controllers {
			req = append(req, fmt.Sprintf("%.1f", r.requests[c]/float64(n)))
		}
		rows = append(rows, []string{fmt.Sprint(n), fmtD(r.total), fmt.Sprintf("%.1f", r.rate()),
			fmtD(r.bound.P50), fmtD(r.bound.P95), fmtD(r.bound.Max),
			fmtD(r.ready.P50), fmtD(r.ready.P95), fmtD(r.ready.Max), strings.Join(req, "/"), cpuCol(r.cpu), fmt.Sprintf("%.0f%%", 100*r.busy)})
	}
	out := table("ClaimToBound: N IPv4 claims created at once; latency per claim from its create call", rows)
	small, big := runs[sizes[0]], runs[sizes[1]]
	if small.n > 0 && big.n > 0 {
		k := float64(big.n) / float64(small.n)
		out += fmt.Sprintf("  scaling N=%d vs N=%d (%.0fx the claims): total time x%.2f, time per claim x%.2f, claims/s x%.2f, bound p95 x%.2f, bound+held p95 x%.2f\n",
			big.n, small.n, k, Ratio(big.total.Seconds(), small.total.Seconds()),
			Ratio(big.total.Seconds()/k, small.total.Seconds()), Ratio(big.rate(), small.rate()),
			Ratio(Ms(big.bound.P95), Ms(small.bound.P95)), Ratio(Ms(big.ready.P95), Ms(small.ready.P95)))
	}
	b.Log(out)
}

// BenchmarkHandoff attaches M bound claims to M existing Services at once
// (annotation) and detaches them again, and measures annotate → the Service
// shows the claim's IP, and detach → the address is held again. It also
// reads the service controller's own handoff histograms.
func BenchmarkHandoff(b *testing.B) {
	e := setup(b)
	const m = 30
	const hist, gap = "metallb_iad_handoff_seconds", "metallb_iad_handoff_unheld_seconds"
	var attach, detachHeld, detachGone Summary
	var attachTotal, heldTotal, goneTotal time.Duration
	var before, after Metrics
	for it := range b.N {
		b.StopTimer()
		ns, class := e.newClass(b, fmt.Sprintf("handoff-%d", it))
		e.claimMany(b, ns, class, "ip", m)
		addrs := make([]iadv1alpha1.ClaimedAddress, m)
		for i := range m {
			addrs[i] = e.claimAddress(b, ns, fmt.Sprintf("ip-%d", i))
		}
		require.NoError(b, parallel(m, 16, func(i int) error {
			return e.k.Create(e.ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i)},
				Spec: corev1.ServiceSpec{
					Type:     corev1.ServiceTypeLoadBalancer,
					Selector: map[string]string{"app": fmt.Sprintf("web-%d", i)},
					Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
				},
			})
		}), "create Services")
		var err error
		before, err = Scrape(e.drivers["service"].MetricsAddr)
		require.NoError(b, err)
		b.StartTimer()

		// Attach: annotate every Service at once.
		got := make([]*expectation, m)
		starts := make([]time.Time, m)
		for i := range m {
			got[i] = e.w.expect(serviceKey(ns, fmt.Sprintf("web-%d", i)), hasIngress(addrs[i].Address))
		}
		t0 := time.Now()
		require.NoError(b, parallel(m, 16, func(i int) error {
			starts[i] = time.Now()
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, iadv1alpha1.ServiceClaimAnnotation, fmt.Sprintf("ip-%d", i))
			return e.k.Patch(e.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i)}},
				client.RawPatch(types.MergePatchType, patch))
		}), "annotate Services")
		require.NoError(b, e.w.awaitAll(e.ctx, got, converge), "Services get their claim's IP")
		attach, attachTotal = latencies(starts, got, t0)

		// Detach: remove every annotation at once.
		held := make([]*expectation, m)
		gone := make([]*expectation, m)
		for i := range m {
			held[i] = e.w.expect(addressKey(addrs[i].Name), isHeldAgain)
			gone[i] = e.w.expect(serviceKey(ns, fmt.Sprintf("web-%d", i)), lacksIngress(addrs[i].Address))
		}
		t0 = time.Now()
		require.NoError(b, parallel(m, 16, func(i int) error {
			starts[i] = time.Now()
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, iadv1alpha1.ServiceClaimAnnotation)
			return e.k.Patch(e.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i)}},
				client.RawPatch(types.MergePatchType, patch))
		}), "remove annotations")
		require.NoError(b, e.w.awaitAll(e.ctx, append(append([]*expectation{}, held...), gone...), converge),
			"addresses held again, Services without the IP")
		detachHeld, heldTotal = latencies(starts, held, t0)
		detachGone, goneTotal = latencies(starts, gone, t0)
		b.StopTimer()
		after, err = Scrape(e.drivers["service"].MetricsAddr)
		require.NoError(b, err)
	}
	b.ReportMetric(Ms(attach.P50), "attach_p50_ms")
	b.ReportMetric(Ms(attach.P95), "attach_p95_ms")
	b.ReportMetric(Ms(attach.Max), "attach_max_ms")
	b.ReportMetric(Ms(detachHeld.P50), "reheld_p50_ms")
	b.ReportMetric(Ms(detachHeld.P95), "reheld_p95_ms")
	b.ReportMetric(Ms(detachHeld.Max), "reheld_max_ms")

	rows := [][]string{{"STEP", "COUNT", "ALL DONE IN", "P50", "P95", "MAX", "MEAN"}}
	row := func(step string, s Summary, total time.Duration) {
		rows = append(rows, []string{step, fmt.Sprint(s.N), fmtD(total), fmtD(s.P50), fmtD(s.P95), fmtD(s.Max), fmtD(s.Mean)})
	}
	row("annotate -> Service ingress has the claim IP", attach, attachTotal)
	row("detach -> address Held again (hold re-armed)", detachHeld, heldTotal)
	row("detach -> Service ingress without the IP", detachGone, goneTotal)
	out := table(fmt.Sprintf("Handoff: %d bound claims attached to %d existing Services at once, then detached (client-side clock)", m, m), rows)

	rows = [][]string{{"SERVICE CONTROLLER HISTOGRAM", "COUNT", "SUM", "MEAN"}}
	for _, h := range []string{hist, gap} {
		count := after[h+"_count"] - before[h+"_count"]
		sum := after[h+"_sum"] - before[h+"_sum"]
		if count == 0 {
			rows = append(rows, []string{h, "0", "-", "- (nothing observed)"})
			continue
		}
		mean := time.Duration(sum / count * float64(time.Second))
		rows = append(rows, []string{h, fmt.Sprintf("%.0f", count), fmt.Sprintf("%.3fs", sum), fmtD(mean)})
		b.ReportMetric(Ms(mean), strings.TrimPrefix(h, "metallb_iad_")+"_mean_ms")
	}
	out += table("Handoff as the service controller measures it (/metrics, this run's delta)", rows)
	b.Log(out)
}

// latencies turns per-item start times and met expectations into a summary
// and the time from t0 until the last was met.
func latencies(starts []time.Time, xs []*expectation, t0 time.Time) (Summary, time.Duration) {
	var ds []time.Duration
	var last time.Time
	for i, x := range xs {
		ds = append(ds, x.At().Sub(starts[i]))
		if x.At().After(last) {
			last = x.At()
		}
	}
	return Summarize(ds), last.Sub(t0)
}

// memSample is one controller's memory at one moment.
type memSample struct {
	proc ProcMem
	// heap is go_memstats_heap_inuse_bytes (spans in use: live objects,
	// garbage not swept yet, fragmentation).
	heap float64
	// live is go_gc_heap_live_bytes, the heap the last collection marked
	// live (0 when the binary does not export it).
	live float64
}

// memory samples every controller. Scraping /metrics allocates in the
// controller, so scraping it until go_gc_duration_seconds_count has moved
// three times drives fresh collections: the in-use heap is the median of
// the readings right after each, and the live heap is the one the last
// collection measured.
func (e *env) memory(b *testing.B) map[string]memSample {
	b.Helper()
	out := map[string]memSample{}
	for _, c := range cluster.Controllers {
		d := e.drivers[c]
		s, gcs, err := sampleHeap(d.MetricsAddr, 3, 30*time.Second)
		require.NoError(b, err, "scrape %s", c)
		if gcs < 3 {
			b.Logf("%s ran only %d garbage collections in 30s: its heap figures may be stale", c, gcs)
		}
		s.proc, err = ReadProcMem(d.Pid())
		require.NoError(b, err, "read /proc status of %s", c)
		out[c] = s
	}
	return out
}

// sampleHeap scrapes addr until `samples` collections have each been seen
// to complete (or timeout) and returns the median in-use heap of the first
// scrape after each, the live heap of the last, and how many collections
// it saw.
func sampleHeap(addr string, samples int, timeout time.Duration) (memSample, int, error) {
	const count = "go_gc_duration_seconds_count"
	m, err := Scrape(addr)
	if err != nil {
		return memSample{}, 0, err
	}
	c0, last := m[count], m[count]
	var readings []float64
	deadline := time.Now().Add(timeout)
	for len(readings) < samples && time.Now().Before(deadline) {
		if m, err = Scrape(addr); err != nil {
			return memSample{}, 0, err
		}
		if m[count] > last {
			last = m[count]
			readings = append(readings, m["go_memstats_heap_inuse_bytes"])
		}
	}
	s := memSample{heap: m["go_memstats_heap_inuse_bytes"], live: m["go_gc_heap_live_bytes"]}
	if len(readings) > 0 {
		slices.Sort(readings)
		s.heap = readings[len(readings)/2]
	}
	return s, int(last - c0), nil
}

// BenchmarkControllerMemory reads each controller process's resident memory
// (/proc) and Go heap (/metrics) at three moments: before its own load (after
// whatever the other benchmarks left), after 1000 plain Services in other
// namespaces that are none of the driver's business (to show what each
// controller's cache keeps of them), and after K more claims Bound and Held.
func BenchmarkControllerMemory(b *testing.B) {
	e := setup(b)
	const plain, perNS, k = 1000, 250, 100
	var a, pb, c map[string]memSample
	var managed, services int
	for it := range b.N {
		b.StopTimer()
		ns, class := e.newClass(b, fmt.Sprintf("memory-%d", it))
		b.StartTimer()
		time.Sleep(2 * time.Second) // let the controllers settle after the class
		a = e.memory(b)

		for j := range plain / perNS {
			require.NoError(b, e.c.EnsureNamespace(e.ctx, fmt.Sprintf("bench-plain-%d-%d", it, j)))
		}
		require.NoError(b, parallel(plain, 16, func(i int) error {
			return e.k.Create(e.ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("bench-plain-%d-%d", it, i/perNS), Name: fmt.Sprintf("plain-%d", i),
					Labels: map[string]string{"app": "unrelated"}, Annotations: map[string]string{"example.com/owner": "someone-else"}},
				Spec: corev1.ServiceSpec{
					Selector: map[string]string{"app": fmt.Sprintf("plain-%d", i)},
					Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
						{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: corev1.ProtocolTCP}},
				},
			})
		}), "create plain Services")
		time.Sleep(3 * time.Second) // the informers take them in
		pb = e.memory(b)

		e.claimMany(b, ns, class, "ip", k)
		time.Sleep(3 * time.Second)
		c = e.memory(b)

		addrs := &iadv1alpha1.IPAddressList{}
		require.NoError(b, e.k.List(e.ctx, addrs))
		managed = len(addrs.Items)
		svcs := &corev1.ServiceList{}
		require.NoError(b, e.k.List(e.ctx, svcs))
		services = len(svcs.Items)
	}

	rows := [][]string{{"CONTROLLER", "RSS A", "RSS B", "RSS C", "PEAK RSS C", "HEAP INUSE A", "HEAP INUSE B", "HEAP INUSE C",
		fmt.Sprintf("HEAP INUSE C PER MANAGED ADDR (/%d)", managed)}}
	for _, ctl := range cluster.Controllers {
		x, y, z := a[ctl], pb[ctl], c[ctl]
		perManaged := Ratio(z.heap, float64(managed))
		rows = append(rows, []string{ctl, MiB(x.proc.RSS), MiB(y.proc.RSS), MiB(z.proc.RSS), MiB(z.proc.HWM),
			MiB(x.heap), MiB(y.heap), MiB(z.heap), strings.TrimPrefix(KiB(perManaged), "+")})
		b.ReportMetric(z.proc.RSS/(1<<20), ctl+"_rss_MiB")
		b.ReportMetric(z.heap/(1<<20), ctl+"_heap_MiB")
		b.ReportMetric(perManaged/(1<<10), ctl+"_heap_KiB/addr")
	}
	out := table(fmt.Sprintf("ControllerMemory: A = before (after earlier benchmarks), B = +%d plain ClusterIP Services in %d other namespaces, "+
		"C = +%d claims Bound and Held; cluster at C: %d IPAddresses, %d Services.\n"+
		"RSS = VmRSS, PEAK = VmHWM (/proc/<pid>/status); HEAP INUSE = go_memstats_heap_inuse_bytes (/metrics), median right after 3 fresh GCs",
		plain, plain/perNS, k, managed, services), rows)

	rows = [][]string{{"CONTROLLER", "LIVE A", "LIVE B", "LIVE C",
		fmt.Sprintf("PER PLAIN SVC (B-A)/%d", plain), fmt.Sprintf("PER NEW ADDR (C-B)/%d", k), fmt.Sprintf("LIVE C PER MANAGED ADDR (/%d)", managed)}}
	for _, ctl := range cluster.Controllers {
		x, y, z := a[ctl], pb[ctl], c[ctl]
		if z.live == 0 {
			continue
		}
		perManaged := Ratio(z.live, float64(managed))
		rows = append(rows, []string{ctl, MiB(x.live), MiB(y.live), MiB(z.live),
			KiB((y.live - x.live) / plain), KiB((z.live - y.live) / k), strings.TrimPrefix(KiB(perManaged), "+")})
		b.ReportMetric((y.live-x.live)/plain, ctl+"_live_B/plain_svc")
		b.ReportMetric((z.live-y.live)/k/(1<<10), ctl+"_live_KiB/new_addr")
	}
	if len(rows) > 1 {
		out += table("Live heap (go_gc_heap_live_bytes, marked live by the last of those GCs): what each controller keeps per object", rows)
	}
	b.Log(out)
}
