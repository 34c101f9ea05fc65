package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
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

// cpuCol formats CPU seconds per process, in cpuProcs order.
func cpuCol(cpu map[string]time.Duration) string {
	var out []string
	for _, p := range cpuProcs {
		out = append(out, fmt.Sprintf("%.1f", cpu[p].Seconds()))
	}
	return strings.Join(out, "/") + " s"
}

// passesCol formats each driver process's reconciles per operation, in
// cluster.Controllers order.
func passesCol(passes map[string]float64, n float64) string {
	perProcess := map[string]float64{}
	for key, v := range passes {
		p, _, _ := strings.Cut(key, "/")
		perProcess[p] += v
	}
	var out []string
	for _, c := range cluster.Controllers {
		out = append(out, fmt.Sprintf("%.1f", perProcess[c]/n))
	}
	return strings.Join(out, "/")
}

// passesByCol formats each driver controller's reconciles per operation,
// process by process in cluster.Controllers order; a controller that made
// no pass is left out.
func passesByCol(passes map[string]float64, n float64) string {
	var out []string
	for _, p := range cluster.Controllers {
		var ctls []string
		for key := range passes {
			if proc, ctl, _ := strings.Cut(key, "/"); proc == p {
				ctls = append(ctls, ctl)
			}
		}
		sort.Strings(ctls)
		for _, ctl := range ctls {
			out = append(out, fmt.Sprintf("%s %.1f", ctl, passes[p+"/"+ctl]/n))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}

// writesCol formats each controller's writes per operation by verb, in
// cluster.Controllers order; a controller that wrote nothing is left out.
func writesCol(by map[string]map[string]float64, n int) string {
	var out []string
	for _, ctl := range cluster.Controllers {
		var verbs []string
		for _, verb := range []string{"POST", "PATCH", "DELETE"} {
			if v := by[ctl][verb]; v > 0 {
				verbs = append(verbs, fmt.Sprintf("%s %.1f", verb, v/float64(n)))
			}
		}
		if len(verbs) > 0 {
			out = append(out, ctl+": "+strings.Join(verbs, " "))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, "; ")
}

// scale is how big a run is. The default takes under 15 minutes on two
// cores; BENCH_SCALE=large adds N=5,000 claims and 5,000 background
// Services; BENCH_SCALE=xl puts 20,000 plain Services in the cluster, for
// the handoffs and under a burst of 1,000 claims; BENCH_SCALE=small is a
// quick look.
type scale struct {
	claims     []int
	background []int
	// claimBackground is how many plain Services the claim rows run among.
	claimBackground int
	// single is how many times each single handoff is repeated.
	single int
	// warm is the burst of claims a class with warm reservations serves.
	warm int
}

func benchScale() scale {
	switch os.Getenv("BENCH_SCALE") {
	case "large":
		return scale{claims: []int{200, 1000, 5000}, background: []int{100, 1000, 5000}, single: 5, warm: 50}
	case "xl":
		return scale{claims: []int{1000}, background: []int{1000, 20000}, claimBackground: 20000, single: 5, warm: 50}
	case "small":
		return scale{claims: []int{50, 100}, background: []int{50}, single: 3, warm: 20}
	}
	return scale{claims: []int{200, 1000}, background: []int{100, 1000}, single: 5, warm: 50}
}

// claimMany creates IPv4 claims of class in namespace, one per name, at
// once and waits until every one is Bound and its address Held. It returns
// create → Bound per claim, traced through ClaimStates, and create → Bound
// and Held, each with the time from the first create until the last claim
// got there and the machine's CPU over that span.
func (e *env) claimMany(b *testing.B, namespace, class string, names []string) (bound, ready opRun) {
	b.Helper()
	n := len(names)
	boundX := make([]*expectation, n)
	heldX := make([]*expectation, n)
	// hops are the states between created and Bound (ClaimStates[1:5]).
	hops := make([][]*expectation, n)
	starts := make([]time.Time, n)
	for i, name := range names {
		boundX[i] = e.w.expect(claimKey(namespace, name), isBound)
		heldX[i] = e.w.expect(addressOfKey(namespace, name), isHeld)
		hops[i] = []*expectation{
			e.w.expect(claimKey(namespace, name), isStamped),
			e.w.expect(placeholderOfKey(namespace, name), exists),
			e.w.expect(placeholderOfKey(namespace, name), isAnswered),
			e.w.expect(addressOfKey(namespace, name), exists),
		}
	}
	cpu0 := e.machine(b)
	t0 := time.Now()
	require.NoError(b, parallel(n, 16, func(i int) error {
		starts[i] = time.Now()
		return e.k.Create(e.ctx, &iadv1alpha1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: names[i]},
			Spec:       iadv1alpha1.IPAddressClaimSpec{ClassName: class, Family: iadv1alpha1.FamilyIPv4},
		})
	}), "create claims")
	require.NoError(b, e.w.awaitAll(e.ctx, boundX, within(n)), "claims Bound")
	cpuBound := e.machine(b)
	require.NoError(b, e.w.awaitAll(e.ctx, heldX, within(n)), "addresses of the claims Held")
	cpuReady := e.machine(b)
	e.w.forget(slices.Concat(hops...)...)
	bound = latencies(starts, boundX, t0, cpuBound.Sub(cpu0))
	bound.traces = traces(starts, hops, boundX)
	ready.window = cpuReady.Sub(cpu0)
	var last time.Time
	for i := range n {
		r := later(boundX[i], heldX[i])
		if r.After(last) {
			last = r
		}
		ready.ds = append(ready.ds, r.Sub(starts[i]))
	}
	ready.total = last.Sub(t0)
	return bound, ready
}

// traces are, per item, its start, the instants of its hops' states and
// that of its last state.
func traces(starts []time.Time, hops [][]*expectation, last []*expectation) [][]time.Time {
	out := make([][]time.Time, len(starts))
	for i := range starts {
		at := []time.Time{starts[i]}
		for _, x := range hops[i] {
			at = append(at, x.At())
		}
		out[i] = append(at, last[i].At())
	}
	return out
}

// later is when the last of xs was met.
func later(xs ...*expectation) time.Time {
	var t time.Time
	for _, x := range xs {
		if x.At().After(t) {
			t = x.At()
		}
	}
	return t
}

// deleteClaims deletes every claim of namespace and waits until the
// addresses of class are gone (the class reclaims with Delete) and MetalLB
// has settled.
func (e *env) deleteClaims(b *testing.B, namespace, class string) {
	b.Helper()
	var claims iadv1alpha1.IPAddressClaimList
	require.NoError(b, e.k.List(e.ctx, &claims, client.InNamespace(namespace)))
	require.NoError(b, parallel(len(claims.Items), 16, func(i int) error {
		return client.IgnoreNotFound(e.k.Delete(e.ctx, &claims.Items[i]))
	}), "delete claims")
	e.eventuallyWithin(b, within(len(claims.Items)), "addresses of class "+class+" gone", func() bool {
		var l iadv1alpha1.IPAddressList
		if e.k.List(e.ctx, &l) != nil {
			return false
		}
		for _, a := range l.Items {
			if a.Spec.ClassName == class {
				return false
			}
		}
		return true
	})
	e.settle(b)
	step("delete the claims of class " + class)
}

// attach annotates svcs[i] with claims[i] at once and waits until each
// Service holds its claim's address, tracing each through AttachStates.
func (e *env) attach(b *testing.B, ns string, svcs, claims []string, addrs []iadv1alpha1.ClaimedAddress) opRun {
	b.Helper()
	n := len(svcs)
	got := make([]*expectation, n)
	// hops are the states between annotated and MetalLB assigned
	// (AttachStates[1:5]).
	hops := make([][]*expectation, n)
	starts := make([]time.Time, n)
	for i := range svcs {
		a := addrs[i]
		got[i] = e.w.expect(serviceKey(ns, svcs[i]), hasIngress(a.Address))
		hops[i] = []*expectation{
			e.w.expect(addressKey(a.Name), isAssociatedTo(ns, svcs[i])),
			e.w.expect(holdOfKey(a.Name), isParked),
			e.w.expect(addressKey(a.Name), isUnheld),
			e.w.expect(serviceKey(ns, svcs[i]), isPinnedTo(a.Address)),
		}
	}
	cpu0 := e.machine(b)
	t0 := time.Now()
	require.NoError(b, parallel(n, 16, func(i int) error {
		starts[i] = time.Now()
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, iadv1alpha1.ServiceClaimAnnotation, claims[i])
		return e.k.Patch(e.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcs[i]}},
			client.RawPatch(types.MergePatchType, patch))
	}), "annotate Services")
	require.NoError(b, e.w.awaitAll(e.ctx, got, within(n)), "Services hold their claim's address")
	r := latencies(starts, got, t0, e.machine(b).Sub(cpu0))
	e.w.forget(slices.Concat(hops...)...)
	r.traces = traces(starts, hops, got)
	return r
}

// detach removes the claim annotation of svcs at once and waits until each
// Service lost its address and the address is held by its placeholder again.
func (e *env) detach(b *testing.B, ns string, svcs []string, addrs []iadv1alpha1.ClaimedAddress) opRun {
	b.Helper()
	n := len(svcs)
	held := make([]*expectation, n)
	gone := make([]*expectation, n)
	starts := make([]time.Time, n)
	for i := range n {
		held[i] = e.w.expect(addressKey(addrs[i].Name), isHeldAgain)
		gone[i] = e.w.expect(serviceKey(ns, svcs[i]), lacksIngress(addrs[i].Address))
	}
	cpu0 := e.machine(b)
	t0 := time.Now()
	require.NoError(b, parallel(n, 16, func(i int) error {
		starts[i] = time.Now()
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, iadv1alpha1.ServiceClaimAnnotation)
		return e.k.Patch(e.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcs[i]}},
			client.RawPatch(types.MergePatchType, patch))
	}), "remove annotations")
	require.NoError(b, e.w.awaitAll(e.ctx, append(append([]*expectation{}, held...), gone...), within(n)),
		"addresses held again, Services without the address")
	r := opRun{window: e.machine(b).Sub(cpu0)}
	var last time.Time
	for i := range n {
		t := later(held[i], gone[i])
		r.ds = append(r.ds, t.Sub(starts[i]))
		if t.After(last) {
			last = t
		}
	}
	r.total = last.Sub(t0)
	return r
}

// repin pins plain Services to other free addresses of the plain pool at
// once (metallb.io/loadBalancerIPs) and waits until each holds its new one:
// what moving an address costs plain MetalLB.
func (e *env) repin(b *testing.B, ns string, svcs, ips []string) opRun {
	b.Helper()
	got := make([]*expectation, len(svcs))
	starts := make([]time.Time, len(svcs))
	for i := range svcs {
		got[i] = e.w.expect(serviceKey(ns, svcs[i]), hasIngress(ips[i]))
	}
	cpu0 := e.machine(b)
	t0 := time.Now()
	require.NoError(b, parallel(len(svcs), 16, func(i int) error {
		starts[i] = time.Now()
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, marks.KeyPin, ips[i])
		return e.k.Patch(e.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcs[i]}},
			client.RawPatch(types.MergePatchType, patch))
	}), "re-pin plain Services")
	require.NoError(b, e.w.awaitAll(e.ctx, got, within(len(svcs))), "plain Services hold their new address")
	return latencies(starts, got, t0, e.machine(b).Sub(cpu0))
}

// handoffSet creates n claims of the handoff benchmark's class (ip-from,
// ...), for each a Service that could share with its placeholder
// (shared-from, ...) and one that could not because it uses the
// placeholder's port (gap-from, ...), and n plain Services to re-pin
// (repin-from, ...). It waits until the claims are Bound and Held and every
// Service has an address (the workloads get one from the plain pool, which
// assigns automatically, as a cluster's default pool would).
func (e *env) handoffSet(b *testing.B, ns, class, repinNS string, from, n int) (claims, shared, gap, repins []string) {
	b.Helper()
	claims = seq("ip", from, n)
	e.claimMany(b, ns, class, claims)
	shared, gap = seq("shared", from, n), seq("gap", from, n)
	got := make([]*expectation, 0, 2*n)
	for i := range n {
		got = append(got, e.w.expect(serviceKey(ns, shared[i]), anyIngress), e.w.expect(serviceKey(ns, gap[i]), anyIngress))
	}
	require.NoError(b, parallel(2*n, 16, func(i int) error {
		if i < n {
			return e.k.Create(e.ctx, plainService(ns, shared[i], 80))
		}
		return e.k.Create(e.ctx, plainService(ns, gap[i-n], 9))
	}), "create workload Services")
	require.NoError(b, e.w.awaitAll(e.ctx, got, within(2*n)), "workload Services get an address")
	e.createPlain(b, repinNS, "repin", from, n)
	e.settle(b)
	step(fmt.Sprintf("handoff: %d claims, their workloads and plain Services", n))
	return claims, shared, gap, seq("repin", from, n)
}

func seq(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("%s-%d", prefix, from+i)
	}
	return out
}

// BenchmarkHandoff measures attach and detach, for both shapes of workload
// (with the parking pool both take the parked handoff; without it, the
// shared and the gap handoff), next to plain MetalLB moving a Service to
// another address: one at a time on an idle cluster, then 30 at once with
// background Services.
func BenchmarkHandoff(b *testing.B) {
	e := setup(b)
	sc := benchScale()
	const m = 30
	for range b.N {
		// One at a time on an idle cluster: one claim, its two workloads and
		// one plain Service. Every Service in the cluster is in each of
		// MetalLB's full passes, so more Services would make each pass of a
		// single handoff longer; the rows below show that cost.
		ns, class := e.newClass(b, "handoff", 2*m, "")
		const repinNS = "bench-repin"
		claims, shared, gap, repins := e.handoffSet(b, ns, class, repinNS, 0, 1)
		idle := fmt.Sprintf("one at a time, idle (%d Services)", e.countServices(b))
		kinds := []struct {
			name string
			svcs *[]string
		}{{"shared", &shared}, {"gap", &gap}}
		addrs := []iadv1alpha1.ClaimedAddress{e.claimAddress(b, ns, claims[0])}
		// Each repetition is one item of the row: its latency, its span
		// and its window add up.
		var plain opRun
		var plainCost cost
		for r := range sc.single {
			s := e.snap(b)
			plain.add(e.repin(b, repinNS, repins[:1], []string{plainFreeIP(r, 0)}))
			plainCost.add(e.since(b, s))
			e.settle(b)
		}
		base := record(newOp("handoff", "plain re-pin, "+idle, sc.single, plain, plainCost, nil))
		for _, k := range kinds {
			var att, det opRun
			var attCost, detCost cost
			for range sc.single {
				s := e.snap(b)
				att.add(e.attach(b, ns, (*k.svcs)[:1], claims[:1], addrs))
				e.settle(b)
				attCost.add(e.since(b, s))
				s = e.snap(b)
				det.add(e.detach(b, ns, (*k.svcs)[:1], addrs))
				e.settle(b)
				detCost.add(e.since(b, s))
			}
			record(newOp("handoff", k.name+" attach, "+idle, sc.single, att, attCost, base).traced(AttachStates, att.traces))
			record(newOp("handoff", k.name+" detach, "+idle, sc.single, det, detCost, base))
		}

		// The other m-1 claims, their workloads and plain Services.
		c, sh, g, rp := e.handoffSet(b, ns, class, repinNS, 1, m-1)
		claims, shared, gap, repins = append(claims, c...), append(shared, sh...), append(gap, g...), append(repins, rp...)
		for _, name := range c {
			addrs = append(addrs, e.claimAddress(b, ns, name))
		}
		e.settle(b)

		// 30 at once with background Services.
		const bgNS = "bench-bg"
		have := 0
		for bi, bg := range sc.background {
			if bg > have {
				e.createPlain(b, bgNS, "bg", have, bg-have)
				have = bg
			}
			e.settle(b)
			step(fmt.Sprintf("handoff: %d background Services", bg))
			svcs := e.countServices(b)
			label := fmt.Sprintf("%d at once, %d background (%d Services)", m, bg, svcs)
			// Memory with these Services cached, so the growth per
			// Service shows between the background sizes.
			mem := e.memory(b)
			resultsMu.Lock()
			memAtServices[svcs] = mem
			resultsMu.Unlock()
			step("memory")
			ips := make([]string, m)
			for i := range m {
				ips[i] = plainFreeIP(10+bi, i)
			}
			s := e.snap(b)
			r := e.repin(b, repinNS, repins, ips)
			e.settle(b)
			base := record(newOp("handoff", "plain re-pin, "+label, m, r, e.since(b, s), nil))
			for _, k := range kinds {
				s := e.snap(b)
				r := e.attach(b, ns, *k.svcs, claims, addrs)
				e.settle(b)
				record(newOp("handoff", k.name+" attach, "+label, m, r, e.since(b, s), base).traced(AttachStates, r.traces))
				s = e.snap(b)
				r = e.detach(b, ns, *k.svcs, addrs)
				e.settle(b)
				record(newOp("handoff", k.name+" detach, "+label, m, r, e.since(b, s), base))
			}
		}
		e.measureServices(b, bgNS)
		resultsMu.Lock()
		slopes := serviceSlopes(memAtServices, objectBytes)
		resultsMu.Unlock()
		if slopes != "" {
			note(slopes)
		}
	}
}

// BenchmarkWarmReservations measures a burst of claims on a class whose
// warm reservations cover it (warmAddresses = the burst), next to the same
// number of plain Services created at once.
func BenchmarkWarmReservations(b *testing.B) {
	e := setup(b)
	n := benchScale().warm
	for range b.N {
		e.settle(b)
		plainNS := fmt.Sprintf("bench-plain-warm-%d", n)
		s := e.snap(b)
		r := e.createPlain(b, plainNS, "svc", 0, n)
		e.settle(b)
		base := record(newOp("claim", fmt.Sprintf("plain Service -> IP, N=%d (warm comparison)", n), n, r, e.since(b, s), nil))
		e.sweep(b, plainNS)

		ns, class := e.newClass(b, "warm", 3*n, fmt.Sprintf(`,"warmAddresses":%d`, n))
		t0 := time.Now()
		e.eventually(b, fmt.Sprintf("%d warm addresses of class %s", n, class), func() bool { return e.warmCount(class) >= n })
		fill := time.Since(t0)
		e.settle(b)
		s = e.snap(b)
		bound, _ := e.claimMany(b, ns, class, seq("ip", 0, n))
		c := e.since(b, s)
		record(newOp("claim", fmt.Sprintf("claim -> Bound, warm reservations covering the burst, N=%d", n), n, bound, c, base).traced(ClaimStates, bound.traces))
		// The refill after the burst, measured apart.
		t1 := time.Now()
		s = e.snap(b)
		e.eventually(b, "warm addresses refilled", func() bool { return e.warmCount(class) >= n })
		e.settle(b)
		refill := e.since(b, s)
		note(table("Warm reservations", [][]string{
			{"STEP", "TIME", "DRIVER WRITES", "METALLB FULL PASSES", "STATUS 409s"},
			{fmt.Sprintf("fill %d warm addresses from nothing", n), fmtD(fill), "-", "-", "-"},
			{fmt.Sprintf("refill %d after the burst", n), fmtD(time.Since(t1)), f1(refill.driverWrites), fmt.Sprint(refill.metallb.FullPasses), fmt.Sprintf("%.0f", refill.statusConflicts())},
		}))

		orig := &iadv1alpha1.IPAddressClass{}
		require.NoError(b, e.k.Get(e.ctx, client.ObjectKey{Name: class}, orig))
		cur := orig.DeepCopy()
		cur.Spec.Parameters.Raw = []byte(strings.Replace(string(cur.Spec.Parameters.Raw), fmt.Sprintf(`"warmAddresses":%d`, n), `"warmAddresses":0`, 1))
		require.NoError(b, e.k.Patch(e.ctx, cur, client.MergeFrom(orig)))
		e.deleteClaims(b, ns, class)
	}
}

// warmCount is how many Available addresses of class are bound to no claim.
func (e *env) warmCount(class string) int {
	var l iadv1alpha1.IPAddressList
	if e.k.List(e.ctx, &l) != nil {
		return 0
	}
	n := 0
	for _, a := range l.Items {
		if a.Spec.ClassName == class && a.Spec.ClaimRef == nil && a.DeletionTimestamp == nil && a.Status.Phase == iadv1alpha1.AddressAvailable {
			n++
		}
	}
	return n
}

// BenchmarkClaimToBound creates N claims at once and measures create →
// Bound per claim next to N plain LoadBalancer Services created at once
// (create → address), at each N of the scale. At the largest N it also
// reads each controller's memory and restarts each controller.
func BenchmarkClaimToBound(b *testing.B) {
	e := setup(b)
	sc := benchScale()
	if sc.claimBackground > 0 {
		e.createPlain(b, "bench-bg", "bg", 0, sc.claimBackground)
		e.settle(b)
		step(fmt.Sprintf("claim: %d background Services", sc.claimBackground))
	}
	for range b.N {
		for idx, n := range sc.claims {
			e.settle(b)
			plainNS := fmt.Sprintf("bench-plain-%d", n)
			s := e.snap(b)
			r := e.createPlain(b, plainNS, "svc", 0, n)
			e.settle(b)
			base := record(newOp("claim", fmt.Sprintf("plain Service -> IP, N=%d", n), n, r, e.since(b, s), nil))
			e.sweep(b, plainNS)

			ns, class := e.newClass(b, fmt.Sprintf("claims-%d", n), n+16, "")
			var sb *standbys
			if idx == len(sc.claims)-1 {
				sb = e.startStandbys(b)
			}
			e.settle(b)
			s = e.snap(b)
			bound, ready := e.claimMany(b, ns, class, seq("ip", 0, n))
			e.settle(b)
			c := e.since(b, s)
			sb.stop(b, &c)
			record(newOp("claim", fmt.Sprintf("claim -> Bound, N=%d", n), n, bound, c, base).traced(ClaimStates, bound.traces))
			record(newOp("claim", fmt.Sprintf("claim -> Bound and Held, N=%d", n), n, ready, c, base))
			// Memory at every N, so the growth per claim shows between them.
			e.memoryReport(b, n)
			if idx == len(sc.claims)-1 {
				e.measureObjects(b)
				resultsMu.Lock()
				slopes := memorySlopes(memAt, objectBytes)
				resultsMu.Unlock()
				if slopes != "" {
					note(slopes)
				}
				e.restartReport(b, n)
				continue
			}
			e.deleteClaims(b, ns, class)
		}
	}
}

// memoryReport adds each controller's memory with the n claims in place
// to the report.
func (e *env) memoryReport(b *testing.B, n int) {
	b.Helper()
	mem := e.memory(b)
	step("memory")
	var addrs iadv1alpha1.IPAddressList
	require.NoError(b, e.k.List(e.ctx, &addrs))
	rows := [][]string{{"CONTROLLER", "RSS", "ANON", "FILE", "PEAK RSS", "HEAP IN USE", "LIVE HEAP", "LIVE HEAP PER ADDRESS"}}
	at := map[string]ProcMem{}
	for _, ctl := range cluster.Controllers {
		m := mem[ctl]
		rows = append(rows, []string{ctl, MiB(m.proc.RSS), MiB(m.proc.Anon), MiB(m.proc.File), MiB(m.proc.HWM), MiB(m.heap), MiB(m.live),
			strings.TrimPrefix(KiB(Ratio(m.live, float64(len(addrs.Items)))), "+")})
		b.ReportMetric(m.proc.RSS/(1<<20), fmt.Sprintf("%s_rss_MiB_N%d", ctl, n))
		at[ctl] = m.proc
	}
	resultsMu.Lock()
	rssAt[n] = at
	memAt[n] = mem
	resultsMu.Unlock()
	note(table(fmt.Sprintf("Memory per controller after the N=%d claims (%d IPAddresses, %d Services in the cluster); "+
		"RSS = VmRSS (ANON = RssAnon: heap and stacks; FILE = RssFile: mostly the binary's own pages), PEAK = VmHWM; "+
		"heap from /metrics right after fresh GCs", n, len(addrs.Items), e.countServices(b)), rows))
}

// rssAt is each controller's memory with the claims of each N in place
// (memoryReport), for the targets.
var rssAt = map[int]map[string]ProcMem{}

// restartResult is one controller's restart.
type restartResult struct {
	ctl      string
	converge time.Duration
	cost     cost
}

var restarts []restartResult

// restartReport restarts each controller in turn and measures how long it
// takes from the new process's start until it has reconciled everything
// (its work queues empty and no reconcile for two seconds), and what that
// resync wrote.
func (e *env) restartReport(b *testing.B, n int) {
	b.Helper()
	rows := [][]string{{"CONTROLLER", "CONVERGED AFTER", "RECONCILES", "RESYNC WRITES", "METALLB STATUS WRITES", "REQUESTS BY VERB AND RESOURCE"}}
	for _, ctl := range cluster.Controllers {
		e.settle(b)
		s := e.snap(b)
		e.drivers[ctl].Stop(10 * time.Second)
		t0 := time.Now()
		d, err := e.startAgain(ctl)
		require.NoError(b, err)
		at, reconciles := e.quiet(b, d, 2*time.Second)
		e.settle(b)
		c := e.since(b, s)
		r := restartResult{ctl: ctl, converge: at.Sub(t0), cost: c}
		restarts = append(restarts, r)
		step("restart: " + ctl)
		rows = append(rows, []string{ctl, fmtD(r.converge), fmt.Sprintf("%.0f", reconciles), fmt.Sprintf("%.0f", ResyncWrites(c.reqs)),
			fmt.Sprintf("%.0f", MetalLBWrites(c.reqs)), PerOp(c.reqs, 1, "leases")})
	}
	note(table(fmt.Sprintf("Restart of each controller with the N=%d claims' addresses in place: new process start -> queues empty", n), rows))
}

// quiet waits until a controller's work queues are empty and its reconcile
// count has not moved for hold, and returns when it last moved and how many
// reconciles it counted. After two minutes it returns what it has.
func (e *env) quiet(b *testing.B, d *cluster.Driver, hold time.Duration) (time.Time, float64) {
	b.Helper()
	var last float64 = -1
	lastAt := time.Now()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		m, err := Scrape(d.MetricsAddr)
		require.NoError(b, err)
		total, depth := m.Sum("controller_runtime_reconcile_total"), m.Sum("workqueue_depth")
		if total != last {
			last, lastAt = total, time.Now()
		}
		if depth == 0 && time.Since(lastAt) >= hold {
			return lastAt, total
		}
		if time.Now().After(deadline) {
			fmt.Printf("bench: %s still reconciling after two minutes\n", d.Controller)
			return time.Now(), total
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// latencies turns per-item start times and met expectations into each
// item's latency and the time from t0 until the last was met, with the
// machine's CPU over that span.
func latencies(starts []time.Time, xs []*expectation, t0 time.Time, window MachineCPU) opRun {
	r := opRun{window: window}
	var last time.Time
	for i, x := range xs {
		r.ds = append(r.ds, x.At().Sub(starts[i]))
		if x.At().After(last) {
			last = x.At()
		}
	}
	r.total = last.Sub(t0)
	return r
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
		if d.PprofAddr != "" {
			// With METALLB_IAD_PPROF, keep the heap profile beside the logs:
			// go tool pprof -sample_index=inuse_space -top <dir>/<controller>.heap.pb.gz
			path := filepath.Join(e.c.Dir, c+".heap.pb.gz")
			if err := SaveURL("http://"+d.PprofAddr+"/debug/pprof/heap?gc=1", path); err != nil {
				b.Logf("heap profile of %s: %v", c, err)
			}
		}
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
