package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/core"
)

// FastFailoverArgs are leader-election flags for replicas that should take
// over from a dead leader in seconds rather than the default 15 s.
var FastFailoverArgs = []string{
	"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
}

// StackOptions tune StartStack.
type StackOptions struct {
	// Cluster tunes the control plane.
	Cluster Options
	// Replicas is how many processes of each controller to run (default 1).
	Replicas int
	// ReplicaArgs are extra flags every controller process gets.
	ReplicaArgs []string
	// NoParkingPool leaves the parking pool out, as the chart does with
	// parking.enabled false: the driver then takes the shared and gap
	// handoffs.
	NoParkingPool bool
	// CoreSrc, when set, is the real core's source tree (address-controller):
	// its binary is built from there and runs as a process in place of the
	// reference core.
	CoreSrc string
}

// Stack is the whole system on this machine: the local control plane with
// the real MetalLB controller, the reference core (in this process) and the
// driver's four binaries as separate OS processes, each as its own
// ServiceAccount under the generated RBAC, with leader election on. The e2e
// suite's local provider, the benchmarks, the demo and the soak all run it.
type Stack struct {
	*Cluster
	// BinDir holds the driver binaries built for this stack.
	BinDir string

	replicaArgs []string
	cancel      context.CancelFunc
	coreDone    chan struct{}
	// realCore is the real core's process (StackOptions.CoreSrc).
	realCore *Process

	mu      sync.Mutex
	drivers map[string][]*Driver
}

// StartStack starts the control plane, installs the driver's RBAC and the
// parking pool, builds the four binaries, starts the reference core and
// opts.Replicas processes of each controller, and waits until each
// controller has a leader.
func StartStack(ctx context.Context, opts StackOptions) (s *Stack, err error) {
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	s = &Stack{replicaArgs: opts.ReplicaArgs, drivers: map[string][]*Driver{}}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if s.Cluster, err = Start(ctx, opts.Cluster); err != nil {
		return s, err
	}
	if err = s.InstallDriverRBAC(ctx); err != nil {
		return s, err
	}
	if !opts.NoParkingPool {
		if err = s.InstallParkingPool(ctx); err != nil {
			return s, err
		}
	}
	if s.BinDir, err = os.MkdirTemp("", "metallb-iad-bin-"); err != nil {
		return s, err
	}
	if err = BuildDriver(s.BinDir); err != nil {
		return s, err
	}
	if opts.CoreSrc != "" {
		err = s.startRealCore(opts.CoreSrc)
	} else {
		err = s.startCore()
	}
	if err != nil {
		return s, err
	}
	for _, name := range Controllers {
		for i := 0; i < opts.Replicas; i++ {
			if _, err = s.StartReplica(ctx, name); err != nil {
				return s, err
			}
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, name := range Controllers {
		if err = s.WaitLeader(wctx, name); err != nil {
			return s, err
		}
	}
	return s, nil
}

// startCore runs the reference core in this process. Its client is not
// rate-limited on the client side, as controller-runtime configures a
// deployed controller, so it never slows down what it serves.
func (s *Stack) startCore() error {
	cfg := rest.CopyConfig(s.Config)
	cfg.QPS, cfg.Burst = -1, 0
	mgr, err := core.NewManager(cfg)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.coreDone = make(chan struct{})
	go func() {
		defer close(s.coreDone)
		if err := mgr.Start(cctx); err != nil && cctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "reference core:", err)
		}
	}()
	return nil
}

// startRealCore builds the real core from its source tree and runs it as a
// process with the admin's rights, as its chart runs it (one replica, no
// metrics), on a free health port.
func (s *Stack) startRealCore(src string) error {
	bin := filepath.Join(s.BinDir, "address-controller")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the real core from %s: %v: %s", src, err, out)
	}
	hp, err := FreePort()
	if err != nil {
		return err
	}
	s.realCore, err = StartProcess(s.Dir, "address-controller", bin,
		"-kubeconfig", s.Kubeconfig, "-leader-elect=false", "-metrics-bind-address", "0",
		"-health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", hp))
	return err
}

// RealCore is the real core's process, nil when the reference core runs
// in this process.
func (s *Stack) RealCore() *Process { return s.realCore }

// StartReplica starts one more process of a controller, with extraArgs
// after the stack's own, and waits until it is ready (a standby is ready
// too: readiness does not wait for the lease).
func (s *Stack) StartReplica(ctx context.Context, controller string, extraArgs ...string) (*Driver, error) {
	d, err := s.StartDriverReady(ctx, s.BinDir, controller, append(append([]string{}, s.replicaArgs...), extraArgs...)...)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.drivers[controller] = append(s.drivers[controller], d)
	s.mu.Unlock()
	return d, nil
}

// Replicas returns the live processes of a controller, oldest first.
func (s *Stack) Replicas(controller string) []*Driver {
	s.mu.Lock()
	defer s.mu.Unlock()
	var live []*Driver
	for _, d := range s.drivers[controller] {
		if !d.Exited() {
			live = append(live, d)
		}
	}
	s.drivers[controller] = live
	return append([]*Driver(nil), live...)
}

// IsLeader reports whether a replica says (in its
// leader_election_master_status metric) that it holds its lease.
func (d *Driver) IsLeader() bool {
	resp, err := http.Get("http://" + d.MetricsAddr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.Contains(string(b), fmt.Sprintf(`leader_election_master_status{name="%s"} 1`, names.LeaseID(d.Controller)))
}

// Leader returns the replica of a controller that holds its lease.
func (s *Stack) Leader(controller string) (*Driver, error) {
	for _, d := range s.Replicas(controller) {
		if d.IsLeader() {
			return d, nil
		}
	}
	return nil, fmt.Errorf("no replica of %s is leader", controller)
}

// WaitLeader waits until a replica of controller holds its lease.
func (s *Stack) WaitLeader(ctx context.Context, controller string) error {
	for {
		if _, err := s.Leader(controller); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no replica of %s took its lease: %w", controller, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops every controller process, the reference core and the control
// plane, and removes the built binaries.
func (s *Stack) Stop() {
	if s == nil {
		return
	}
	var wg sync.WaitGroup
	for _, name := range Controllers {
		for _, d := range s.Replicas(name) {
			wg.Add(1)
			go func() { defer wg.Done(); d.Stop(10 * time.Second) }()
		}
	}
	wg.Wait()
	if s.cancel != nil {
		s.cancel()
		<-s.coreDone
	}
	if s.realCore != nil {
		s.realCore.Stop(10 * time.Second)
	}
	if s.Cluster != nil {
		s.Cluster.Stop()
	}
	if s.BinDir != "" {
		_ = os.RemoveAll(s.BinDir)
	}
}
