package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// converge bounds every wait: the benchmarks fail when the system does not
// converge within it, and never judge how fast it did.
const converge = 3 * time.Minute

// env is one benchmark's control plane. Each benchmark starts its own and
// stops it when it ends, so none waits for MetalLB to digest what the one
// before it left behind (unit tests of the helpers need none).
type env struct {
	s       *cluster.Stack
	c       *cluster.Cluster
	k       client.Client
	w       *watcher
	cs      kubernetes.Interface
	drivers map[string]*cluster.Driver
	cancel  context.CancelFunc
	ctx     context.Context
	// audit attributes MetalLB's refused status updates to their cause.
	audit *ConflictTracker
}

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	code := m.Run()
	if r := report(); r != "" {
		fmt.Print(r)
	}
	os.Exit(code)
}

// setup starts the benchmark's own environment and stops it when the
// benchmark ends; BENCH_PARKING=off leaves the parking pool out.
func setup(b *testing.B) *env {
	b.Helper()
	return setupParking(b, os.Getenv("BENCH_PARKING") != "off")
}

// setupParking is setup with the parking pool (parking) or without it, as
// the chart runs the driver with parking.enabled false.
func setupParking(b *testing.B, parking bool) *env {
	b.Helper()
	t0 := time.Now()
	e, err := start(parking)
	require.NoError(b, err, "start the local control plane and the driver")
	b.Cleanup(e.stop)
	beginBench(strings.TrimPrefix(b.Name(), "Benchmark"), e.c.MetalLB().LogPath)
	fmt.Printf("bench: control plane, MetalLB, %s and the four driver binaries up in %s\n",
		e.coreName(), time.Since(t0).Round(time.Millisecond))
	step("start")
	if os.Getenv("KEEP_CLUSTER_LOGS") != "" {
		fmt.Printf("bench: process logs in %s\n", e.c.Dir)
	}
	return e
}

// start brings up the whole stack (cluster.StartStack: the control plane
// with MetalLB, the parking pool when parking is set, the reference core
// in-process, or the real one built from E2E_CORE_SRC, and the four driver
// binaries, one process each, as their own ServiceAccounts with leader
// election on), then the benchmark's own clients, its plain pool and its
// watcher.
func start(parking bool) (e *env, err error) {
	e = &env{drivers: map[string]*cluster.Driver{}}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			e.stop()
		}
	}()
	ctx := e.ctx
	// MetalLB logs its full passes over every Service only at info level.
	if e.s, err = cluster.StartStack(ctx, cluster.StackOptions{
		Cluster:       cluster.Options{MetalLBLogLevel: "info", AuditPolicy: auditPolicy()},
		NoParkingPool: !parking,
		CoreSrc:       coreSource(),
	}); err != nil {
		return e, err
	}
	e.c = e.s.Cluster
	e.audit = NewConflictTracker(e.c.AuditLogPath())
	// The benchmark's own client runs without client-side rate limiting,
	// as controller-runtime configures a deployed controller (and as the
	// stack runs the core), so it does not skew the driver's figures.
	cfg := rest.CopyConfig(e.c.Config)
	cfg.QPS, cfg.Burst = -1, 0
	if e.k, err = client.New(cfg, client.Options{Scheme: bootstrap.Scheme()}); err != nil {
		return e, err
	}
	if e.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return e, err
	}
	if err = e.createPlainPool(ctx); err != nil {
		return e, err
	}
	if e.w, err = newWatcher(ctx, cfg); err != nil {
		return e, err
	}
	for _, name := range cluster.Controllers {
		e.drivers[name] = e.s.Replicas(name)[0]
	}
	return e, nil
}

// startAgain starts a new process of a controller whose process was
// stopped and waits until it is ready and holds the lease.
func (e *env) startAgain(ctl string) (*cluster.Driver, error) {
	d, err := e.s.StartReplica(e.ctx, ctl)
	if err != nil {
		return nil, err
	}
	e.drivers[ctl] = d
	wctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	return d, e.s.WaitLeader(wctx, ctl)
}

func (e *env) stop() {
	e.s.Stop()
	if e.cancel != nil {
		e.cancel()
	}
}

// nextAddr is the offset in 10.200.0.0/16 of the first address no class
// of this run has taken yet, so no two classes overlap (the class
// controller would refuse the later one).
var nextAddr atomic.Int32

// classRange takes the next size addresses of 10.200.0.0/16 as a MetalLB
// range.
func classRange(size int) (string, error) {
	end := nextAddr.Add(int32(size))
	start := end - int32(size)
	if end > 1<<16 {
		return "", fmt.Errorf("out of addresses in 10.200.0.0/16")
	}
	at := func(off int32) string { return fmt.Sprintf("10.200.%d.%d", off>>8, off&0xff) }
	return at(start) + "-" + at(end-1), nil
}

// newClass creates a namespace and a class of our provisioner over size
// fresh addresses of 10.200.0.0/16, with extra parameters merged in, and
// waits until MetalLB has loaded its pool.
func (e *env) newClass(b *testing.B, name string, size int, extra string) (namespace, class string) {
	b.Helper()
	r, err := classRange(size)
	require.NoError(b, err)
	namespace, class = "bench-"+name, "bench-"+name
	require.NoError(b, e.c.EnsureNamespace(e.ctx, namespace))
	params := fmt.Sprintf(`{"addresses":[%q]%s}`, r, extra)
	require.NoError(b, e.k.Create(e.ctx, cluster.Class(class, iadv1alpha1.ReclaimDelete, params)))
	pool := &metallbv1beta1.IPAddressPool{}
	e.eventually(b, "MetalLB loads pool "+names.PoolName(class), func() bool {
		err := e.k.Get(e.ctx, client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: names.PoolName(class)}, pool)
		return err == nil && pool.Status.AvailableIPv4 > 0
	})
	return namespace, class
}

// plainPool is the autoAssign pool plain Services draw from: MetalLB used
// the way most clusters use it, the baseline every figure is compared to.
const plainPool = "bench-plain"

// plainRange is plainPool's range. Plain Services are given addresses from
// its start; re-pins go to plainFreeIP, far above what they are given.
const plainRange = "10.100.0.0/16"

// plainFreeIP is the i-th address re-pinned Services move to in round r.
func plainFreeIP(r, i int) string { return fmt.Sprintf("10.100.%d.%d", 255-r, 10+i) }

func (e *env) createPlainPool(ctx context.Context) error {
	auto := true
	return e.k.Create(ctx, &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: plainPool},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{plainRange}, AutoAssign: &auto},
	})
}

// eventually polls cond until it holds, failing the benchmark after converge.
func (e *env) eventually(b *testing.B, what string, cond func() bool) {
	b.Helper()
	e.eventuallyWithin(b, converge, what, cond)
}

// eventuallyWithin polls cond until it holds, failing the benchmark after limit.
func (e *env) eventuallyWithin(b *testing.B, limit time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("did not converge within %s: %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// parallel runs f(i) for i in [0, n) on a few workers and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
		next atomic.Int32
	)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d failed, first: %s", len(errs), strings.Join(errs[:1], ""))
	}
	return nil
}

// scrapeAll scrapes every driver's metrics endpoint.
func (e *env) scrapeAll(b *testing.B) map[string]Metrics {
	b.Helper()
	out := map[string]Metrics{}
	for _, name := range cluster.Controllers {
		m, err := Scrape(e.drivers[name].MetricsAddr)
		require.NoError(b, err, "scrape %s", name)
		out[name] = m
	}
	return out
}

// coreSource is E2E_CORE_SRC as an absolute path, the real core's source
// tree (address-controller), as for the e2e suite; "" for the reference
// core.
func coreSource() string {
	src := os.Getenv("E2E_CORE_SRC")
	if src == "" {
		return ""
	}
	if abs, err := filepath.Abs(src); err == nil {
		return abs
	}
	return src
}

// coreName says which core the run uses.
func (e *env) coreName() string {
	if e.s.RealCore() != nil {
		return "the real core (E2E_CORE_SRC)"
	}
	return "the reference core"
}

// cpuUse is the CPU time each process has used so far (the four drivers,
// MetalLB, and this process, which runs the reference core; with the real
// core its process's CPU is counted with this one's).
type cpuUse struct {
	procs map[string]time.Duration
}

// cpuProcs are the processes cpuUse reports, in order.
var cpuProcs = append(append([]string{}, cluster.Controllers...), "metallb", "core+bench")

func (e *env) cpu(b *testing.B) cpuUse {
	b.Helper()
	u := cpuUse{procs: map[string]time.Duration{}}
	pids := map[string]int{"metallb": e.c.MetalLB().Pid(), "core+bench": os.Getpid()}
	for _, c := range cluster.Controllers {
		pids[c] = e.drivers[c].Pid()
	}
	for name, pid := range pids {
		d, err := ReadProcCPU(pid)
		require.NoError(b, err, "CPU time of %s", name)
		u.procs[name] = d
	}
	if core := e.s.RealCore(); core != nil {
		d, err := ReadProcCPU(core.Pid())
		require.NoError(b, err, "CPU time of the real core")
		u.procs["core+bench"] += d
	}
	return u
}

// since returns the CPU each process used between old and u.
func (u cpuUse) since(old cpuUse) map[string]time.Duration {
	d := map[string]time.Duration{}
	for k, v := range u.procs {
		d[k] = v - old.procs[k]
	}
	return d
}

// claimAddress returns the first bound address of a claim.
func (e *env) claimAddress(b *testing.B, namespace, name string) iadv1alpha1.ClaimedAddress {
	b.Helper()
	c := &iadv1alpha1.IPAddressClaim{}
	require.NoError(b, e.k.Get(e.ctx, client.ObjectKey{Namespace: namespace, Name: name}, c))
	require.Len(b, c.Status.Addresses, 1, "claim %s/%s addresses", namespace, name)
	return c.Status.Addresses[0]
}
