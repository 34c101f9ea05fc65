package bench

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/test/cluster"
)

// snap is the state of every counter the benchmark reads, at one moment.
type snap struct {
	at      time.Time
	api     Metrics
	drivers map[string]Metrics
	logOff  int64
	cpu     cpuUse
	// audit is the audit log's counters so far: refused status updates by
	// the writer each is attributed to, and the driver's Event writes.
	audit AuditTotals
}

// cost is what one operation cost, between two snaps.
type cost struct {
	dur time.Duration
	// reqs is every API request the API server answered, by verb and
	// resource, from apiserver_request_total (every client: the driver,
	// MetalLB, the reference core and the benchmark's own calls).
	reqs map[Request]float64
	// conflicts is the 409 answers among reqs.
	conflicts map[Request]float64
	// conflictsBy is MetalLB's refused status updates by the writer of
	// the Service's last write before each (the audit log): the driver,
	// MetalLB itself or the user (the benchmark).
	conflictsBy map[string]float64
	// driverWrites is the four driver controllers' writes, lease renewals
	// left out.
	driverWrites float64
	// driverEvents is how many of driverWrites were Events (the audit log).
	driverEvents float64
	// driverReqs is the four driver controllers' requests, lease requests
	// left out.
	driverReqs float64
	// passes is each driver controller's reconciles (PassesByController):
	// where the driver spent a pass on the operation.
	passes map[string]float64
	// writesBy is each controller's writes by verb (WritesByController).
	writesBy map[string]map[string]float64
	// metallb is what MetalLB's log shows.
	metallb MetalLBLog
	// cpu is each process's CPU time between the snapshots, the settling
	// after the operation included: what the operation cost.
	cpu map[string]time.Duration
}

// statusConflicts is how many of MetalLB's Service status updates the API
// server refused with 409 (only MetalLB writes Service status).
func (c cost) statusConflicts() float64 { return c.conflicts["PUT services/status"] }

func (e *env) apiMetrics(b *testing.B) Metrics {
	b.Helper()
	m, err := ScrapeAPIServer(e.ctx, e.cs)
	require.NoError(b, err, "scrape the API server's metrics")
	return m
}

func (e *env) snap(b *testing.B) snap {
	b.Helper()
	return snap{at: time.Now(), api: e.apiMetrics(b), drivers: e.scrapeAll(b), logOff: FileSize(e.c.MetalLB().LogPath), cpu: e.cpu(b), audit: e.audit.Totals()}
}

// since is the cost of what happened after s.
func (e *env) since(b *testing.B, s snap) cost {
	b.Helper()
	now := e.snap(b)
	c := cost{dur: now.at.Sub(s.at), reqs: APIRequests(s.api, now.api), conflicts: APIRequestsWithCode(s.api, now.api, "409"),
		conflictsBy: map[string]float64{}, passes: PassesByController(s.drivers, now.drivers)}
	for k, v := range now.audit.Conflicts {
		c.conflictsBy[k] = v - s.audit.Conflicts[k]
	}
	c.driverEvents = now.audit.DriverEvents - s.audit.DriverEvents
	leases := c.reqs["PUT leases"] + c.reqs["POST leases"]
	c.driverWrites = DriverWrites(s.drivers, now.drivers, leases)
	c.writesBy = WritesByController(s.drivers, now.drivers)
	for _, ctl := range cluster.Controllers {
		c.driverReqs += now.drivers[ctl].Sum("rest_client_requests_total") - s.drivers[ctl].Sum("rest_client_requests_total")
	}
	c.driverReqs = max(c.driverReqs-leases-c.reqs["GET leases"], 0)
	c.metallb = CountMetalLBLog(ReadFrom(e.c.MetalLB().LogPath, s.logOff))
	c.cpu = now.cpu.since(s.cpu)
	return c
}

// settleMax bounds settle. A full pass over 1,121 Services takes MetalLB
// about a minute, and an operation that makes a pass fail (a 409 on one of
// its status writes) is followed by another, so a minute was too short.
const settleMax = 3 * time.Minute

// settle waits until MetalLB has logged nothing for a second and a half,
// so one operation's tail is not counted against the next. At info level
// it logs each reconcile it starts and each Service a full pass writes, so
// a pass still running counts as busy (waiting only for no new reconcile
// let the next operation start in the middle of the previous one's pass,
// and wait for its end). It gives up quietly after settleMax: a figure
// taken then includes some of the previous operation's tail.
func (e *env) settle(b *testing.B) {
	b.Helper()
	path := e.c.MetalLB().LogPath
	off, since := FileSize(path), time.Now()
	deadline := time.Now().Add(settleMax)
	for time.Since(since) < 1500*time.Millisecond {
		if time.Now().After(deadline) {
			fmt.Printf("bench: MetalLB still busy after %s; going on\n", settleMax)
			return
		}
		time.Sleep(250 * time.Millisecond)
		if sz := FileSize(path); sz != off {
			since, off = time.Now(), sz
		}
	}
}

// op is one measured operation of the run, with its baseline.
type op struct {
	// section groups rows in the report; name says what was measured.
	section, name string
	n             int
	lat           Summary
	// total runs from the first action to the last item done.
	total time.Duration
	// window is the machine's CPU time over the same span (summed over
	// repetitions): its busy share is the operation's own, settling not
	// counted.
	window MachineCPU
	cost   cost
	// base is the plain-MetalLB operation it is compared with (nil for a
	// baseline itself).
	base *op
	// states names the states each item passed through (ClaimStates,
	// AttachStates; nil when none were traced) and traces holds, per item,
	// when it reached each (zero: never seen).
	states []string
	traces [][]time.Time
}

// opRun is what one measured operation (or several repetitions of it)
// observed.
type opRun struct {
	// ds is each item's latency.
	ds []time.Duration
	// total runs from the first action to the last item done (summed over
	// repetitions), window is the machine's CPU over it.
	total  time.Duration
	window MachineCPU
	// traces are, per item, the instants it reached each traced state.
	traces [][]time.Time
}

func (r opRun) lat() Summary { return Summarize(r.ds) }

// add appends a repetition.
func (r *opRun) add(o opRun) {
	r.ds = append(r.ds, o.ds...)
	r.total += o.total
	r.window = r.window.Add(o.window)
	r.traces = append(r.traces, o.traces...)
}

// newOp is an operation measured by r.
func newOp(section, name string, n int, r opRun, c cost, base *op) *op {
	return &op{section: section, name: name, n: n, lat: r.lat(), total: r.total, window: r.window, cost: c, base: base}
}

// traced adds the states its items were traced through.
func (o *op) traced(states []string, traces [][]time.Time) *op {
	o.states, o.traces = states, traces
	return o
}

// within bounds the wait for n items: converge, and 100 ms more per
// item. It only tells a run that does not converge from a slow one: a
// burst of 5,000 claims (BENCH_SCALE=large) at the rate 1,000 reach on two
// busy cores takes longer than converge alone.
func within(n int) time.Duration { return converge + time.Duration(n)*100*time.Millisecond }

// machine reads the machine's CPU time now.
func (e *env) machine(b *testing.B) MachineCPU {
	b.Helper()
	m, err := ReadMachineCPU()
	require.NoError(b, err)
	return m
}

func (o *op) rate() float64 { return Ratio(float64(o.n), o.total.Seconds()) }

// results are the operations of the run, in order, for the final report.
var (
	resultsMu sync.Mutex
	results   []*op
	extras    []string
)

func record(o *op) *op {
	resultsMu.Lock()
	results = append(results, o)
	resultsMu.Unlock()
	step(o.section + ": " + o.name)
	return o
}

// The run's clock (under resultsMu): when the run and its previous step
// started, the running benchmark's MetalLB log and how far it has been
// read, the full passes read from it, and where each benchmark's time went.
var (
	runStart = time.Now()
	lastStep = runStart
	stepLog  string
	stepFile os.FileInfo
	stepOff  int64
	passes   PassClock
	benches  []*benchClock
)

// benchClock is where one benchmark's time went: its wall time, from the
// end of the step before its start (the previous benchmark's teardown
// included) to its last step, and the full passes MetalLB made in it.
type benchClock struct {
	name     string
	wall     time.Duration
	passes   int
	inPasses time.Duration
}

// beginBench counts the next steps against the benchmark name, and the
// full passes of the MetalLB controller whose log is at path.
func beginBench(name, path string) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	benches = append(benches, &benchClock{name: name})
	stepLog, stepOff, passes = path, FileSize(path), PassClock{}
	stepFile, _ = os.Stat(path)
}

// step prints how long the part of the run that just ended took, and how
// many full passes MetalLB made in it and for how long, so a run's output
// shows where its time goes.
func step(what string) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	d := time.Since(lastStep)
	lastStep = time.Now()
	line := fmt.Sprintf("bench: %7.1fs  %s", d.Seconds(), what)
	before := passes
	if stepLog != "" {
		if st, err := os.Stat(stepLog); err == nil && !os.SameFile(st, stepFile) {
			// A new MetalLB process (a sweep restarts it) has a log of its
			// own; the pass the old one was in never ended.
			stepFile, stepOff, passes.started = st, 0, time.Time{}
		}
		text := ReadFrom(stepLog, stepOff)
		text = text[:strings.LastIndexByte(text, '\n')+1] // whole lines only
		stepOff += int64(len(text))
		passes.Read(text)
	}
	n, in := passes.Passes-before.Passes, passes.Time-before.Time
	if n > 0 {
		line += fmt.Sprintf("  (MetalLB: %d full passes, %.0fs)", n, in.Seconds())
	}
	fmt.Println(line)
	if len(benches) > 0 {
		cur := benches[len(benches)-1]
		cur.wall += d
		cur.passes += n
		cur.inPasses += in
	}
}

// note adds a rendered table to the final report.
func note(s string) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	extras = append(extras, s)
}

// plainService is a Service as a tenant writes it: LoadBalancer, a
// selector, port 80; annotations are added by the caller. It takes no node
// port (MetalLB needs none): the default node-port range holds 2,768, fewer
// than the large run's 5,000 background Services.
func plainService(ns, name string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			AllocateLoadBalancerNodePorts: ptr.To(false),
			Selector:                      map[string]string{"app": name},
			Ports:                         []corev1.ServicePort{{Name: "p", Port: port, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// anyIngress is met once a Service shows any load-balancer address.
func anyIngress(o client.Object) bool {
	return len(o.(*corev1.Service).Status.LoadBalancer.Ingress) > 0
}

// createPlain creates n plain LoadBalancer Services (prefix-i) in ns at
// once and waits until MetalLB has given each an address from the
// autoAssign pool. It returns create → address per Service.
func (e *env) createPlain(b *testing.B, ns, prefix string, from, n int) opRun {
	b.Helper()
	require.NoError(b, e.c.EnsureNamespace(e.ctx, ns))
	got := make([]*expectation, n)
	starts := make([]time.Time, n)
	for i := range n {
		got[i] = e.w.expect(serviceKey(ns, fmt.Sprintf("%s-%d", prefix, from+i)), anyIngress)
	}
	cpu0 := e.machine(b)
	t0 := time.Now()
	require.NoError(b, parallel(n, 16, func(i int) error {
		starts[i] = time.Now()
		return e.k.Create(e.ctx, plainService(ns, fmt.Sprintf("%s-%d", prefix, from+i), 80))
	}), "create plain Services")
	require.NoError(b, e.w.awaitAll(e.ctx, got, within(n)), "plain Services get an address")
	return latencies(starts, got, t0, e.machine(b).Sub(cpu0))
}

// sweep deletes every Service of ns (plain Services only: they carry no
// finalizer and nothing of the driver waits on MetalLB for them) with
// MetalLB stopped, then starts it again and waits until it has settled.
// MetalLB processes deletions one at a time, and each deletion of an
// allocated Service is a full pass over every Service left: 1,000 of them
// kept it busy for minutes, and whatever was measured next waited behind
// them. A new MetalLB process reads the cluster as it is, in one pass.
func (e *env) sweep(b *testing.B, ns string) {
	b.Helper()
	e.c.KillMetalLB() // it keeps no state a graceful stop would save
	var list corev1.ServiceList
	require.NoError(b, e.k.List(e.ctx, &list, client.InNamespace(ns)))
	require.NoError(b, parallel(len(list.Items), 16, func(i int) error {
		return client.IgnoreNotFound(e.k.Delete(e.ctx, &list.Items[i]))
	}), "delete Services")
	e.eventuallyWithin(b, within(len(list.Items)), "Services of "+ns+" gone", func() bool {
		var l corev1.ServiceList
		return e.k.List(e.ctx, &l, client.InNamespace(ns)) == nil && len(l.Items) == 0
	})
	require.NoError(b, e.c.StartMetalLB(e.ctx), "start MetalLB again")
	e.eventually(b, "MetalLB's first pass over every Service", func() bool {
		return strings.Contains(ReadFrom(e.c.MetalLB().LogPath, 0), metallbPassEnd)
	})
	e.settle(b)
	step("sweep " + ns)
}

// metallbPassEnd is the line MetalLB logs (at info level) when a full pass
// over every Service ends.
const metallbPassEnd = `"end reconcile":"metallbreload/reload"`

// countServices is how many Services the cluster holds.
func (e *env) countServices(b *testing.B) int {
	b.Helper()
	var l corev1.ServiceList
	require.NoError(b, e.k.List(e.ctx, &l))
	return len(l.Items)
}

// add sums another cost into c.
func (c *cost) add(o cost) {
	c.dur += o.dur
	if c.reqs == nil {
		c.reqs, c.conflicts, c.cpu = map[Request]float64{}, map[Request]float64{}, map[string]time.Duration{}
	}
	for k, v := range o.reqs {
		c.reqs[k] += v
	}
	for k, v := range o.conflicts {
		c.conflicts[k] += v
	}
	if c.conflictsBy == nil {
		c.conflictsBy = map[string]float64{}
	}
	for k, v := range o.conflictsBy {
		c.conflictsBy[k] += v
	}
	for k, v := range o.cpu {
		c.cpu[k] += v
	}
	c.driverWrites += o.driverWrites
	c.driverEvents += o.driverEvents
	if c.writesBy == nil {
		c.writesBy = map[string]map[string]float64{}
	}
	for ctl, byVerb := range o.writesBy {
		if c.writesBy[ctl] == nil {
			c.writesBy[ctl] = map[string]float64{}
		}
		for verb, v := range byVerb {
			c.writesBy[ctl][verb] += v
		}
	}
	c.driverReqs += o.driverReqs
	if c.passes == nil {
		c.passes = map[string]float64{}
	}
	for k, v := range o.passes {
		c.passes[k] += v
	}
	c.metallb.Reconciles += o.metallb.Reconciles
	c.metallb.FullPasses += o.metallb.FullPasses
	c.metallb.ForcedReloads += o.metallb.ForcedReloads
	c.metallb.FailedPasses += o.metallb.FailedPasses
	c.metallb.UpdateFailures += o.metallb.UpdateFailures
	c.metallb.Conflicts += o.metallb.Conflicts
}
