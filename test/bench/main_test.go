package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// env is the one control plane all benchmarks share, started by the first
// benchmark that needs it (unit tests of the helpers need none).
type env struct {
	s       *cluster.Stack
	c       *cluster.Cluster
	k       client.Client
	w       *watcher
	drivers map[string]*cluster.Driver
	cancel  context.CancelFunc
	ctx     context.Context
}

var (
	envOnce sync.Once
	theEnv  *env
	envErr  error
)

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	code := m.Run()
	if theEnv != nil {
		theEnv.stop()
	}
	os.Exit(code)
}

// setup returns the shared environment, starting it on first use.
func setup(b *testing.B) *env {
	b.Helper()
	envOnce.Do(func() {
		t0 := time.Now()
		theEnv, envErr = start()
		if envErr == nil {
			fmt.Printf("bench: control plane, MetalLB, reference core and the four driver binaries up in %s\n",
				time.Since(t0).Round(time.Millisecond))
			if os.Getenv("KEEP_CLUSTER_LOGS") != "" {
				fmt.Printf("bench: process logs in %s\n", theEnv.c.Dir)
			}
		}
	})
	require.NoError(b, envErr, "start the local control plane and the driver")
	return theEnv
}

// start brings up the whole stack (cluster.Stack) with one process of each
// driver binary, and the benchmark's own unthrottled client and watcher.
func start() (e *env, err error) {
	e = &env{drivers: map[string]*cluster.Driver{}}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			e.stop()
		}
	}()
	if e.s, err = cluster.StartStack(e.ctx, cluster.StackOptions{}); err != nil {
		return e, err
	}
	e.c = e.s.Cluster
	// The benchmark's own client runs without client-side rate limiting,
	// as controller-runtime configures a deployed controller, so it does
	// not skew the driver's figures.
	cfg := rest.CopyConfig(e.c.Config)
	cfg.QPS, cfg.Burst = -1, 0
	if e.k, err = client.New(cfg, client.Options{Scheme: bootstrap.Scheme()}); err != nil {
		return e, err
	}
	if e.w, err = newWatcher(e.ctx, cfg); err != nil {
		return e, err
	}
	for _, name := range cluster.Controllers {
		e.drivers[name] = e.s.Replicas(name)[0]
	}
	return e, nil
}

func (e *env) stop() {
	if e.cancel != nil {
		e.cancel()
	}
	e.s.Stop()
}

// rangeSeq numbers the /22 ranges handed to classes, so no two classes of
// a run overlap (the class controller would refuse the later one).
var rangeSeq atomic.Int32

// newClass creates a namespace and a class of our provisioner over a fresh
// /22 of 10.200.0.0/16, and waits until MetalLB has loaded its pool.
func (e *env) newClass(b *testing.B, name string) (namespace, class string) {
	b.Helper()
	k := rangeSeq.Add(1) - 1
	require.Less(b, k, int32(64), "out of /22 ranges in 10.200.0.0/16")
	cidr := fmt.Sprintf("10.200.%d.0/22", 4*k)
	namespace, class = "bench-"+name, "bench-"+name
	require.NoError(b, e.c.EnsureNamespace(e.ctx, namespace))
	require.NoError(b, e.k.Create(e.ctx, &iadv1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: iadv1alpha1.IPAddressClassSpec{
			Provisioner:   names.Provisioner,
			ReclaimPolicy: iadv1alpha1.ReclaimDelete,
			Parameters:    &apiextensionsv1.JSON{Raw: fmt.Appendf(nil, `{"addresses":[%q]}`, cidr)},
		},
	}))
	pool := &metallbv1beta1.IPAddressPool{}
	e.eventually(b, "MetalLB loads pool "+names.PoolName(class), func() bool {
		err := e.k.Get(e.ctx, client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: names.PoolName(class)}, pool)
		return err == nil && pool.Status.AvailableIPv4 > 0
	})
	return namespace, class
}

// eventually polls cond until it holds, failing the benchmark after converge.
func (e *env) eventually(b *testing.B, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(converge)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("did not converge within %s: %s", converge, what)
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

// cpuUse is the CPU time each process has used so far (the four drivers,
// MetalLB, and this process, which runs the reference core), and the
// machine's.
type cpuUse struct {
	procs   map[string]time.Duration
	machine MachineCPU
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
	var err error
	u.machine, err = ReadMachineCPU()
	require.NoError(b, err)
	return u
}

// since returns the CPU used between old and u, and the machine's busy share.
func (u cpuUse) since(old cpuUse) (map[string]time.Duration, float64) {
	d := map[string]time.Duration{}
	for k, v := range u.procs {
		d[k] = v - old.procs[k]
	}
	busy := Ratio(float64(u.machine.Busy-old.machine.Busy), float64(u.machine.Total-old.machine.Total))
	return d, busy
}

// claimAddress returns the first bound address of a claim.
func (e *env) claimAddress(b *testing.B, namespace, name string) iadv1alpha1.ClaimedAddress {
	b.Helper()
	c := &iadv1alpha1.IPAddressClaim{}
	require.NoError(b, e.k.Get(e.ctx, client.ObjectKey{Namespace: namespace, Name: name}, c))
	require.Len(b, c.Status.Addresses, 1, "claim %s/%s addresses", namespace, name)
	return c.Status.Addresses[0]
}
