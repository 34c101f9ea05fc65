package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/core"
)

// Replicas is how many processes of each controller the local provider runs,
// as the chart would run replicas: one leader, the rest on standby.
const Replicas = 2

// clusterName names the e2e cluster in the e2e-framework context.
const clusterName = "metallb-iad-e2e"

// LocalProvider is an e2e-framework cluster provider that runs everything on
// this machine: the local control plane with the real MetalLB controller,
// the reference core (in-process), and the driver's four binaries as
// separate OS processes, Replicas each, with leader election on, each as its
// own ServiceAccount.
type LocalProvider struct {
	name   string
	c      *cluster.Cluster
	binDir string
	cancel context.CancelFunc

	mu      sync.Mutex
	drivers map[string][]*cluster.Driver
}

var _ types.E2EClusterProvider = &LocalProvider{}

// NewLocalProvider returns an unstarted local provider.
func NewLocalProvider() *LocalProvider {
	return &LocalProvider{drivers: map[string][]*cluster.Driver{}}
}

// SetDefaults implements types.E2EClusterProvider.
func (p *LocalProvider) SetDefaults() types.E2EClusterProvider { return p }

// WithName implements types.E2EClusterProvider.
func (p *LocalProvider) WithName(name string) types.E2EClusterProvider { p.name = name; return p }

// WithVersion is accepted for the interface; the version is the one
// `make tools` built.
func (p *LocalProvider) WithVersion(string) types.E2EClusterProvider { return p }

// WithPath is accepted for the interface; binaries come from bin/k8s.
func (p *LocalProvider) WithPath(string) types.E2EClusterProvider { return p }

// WithOpts implements types.E2EClusterProvider.
func (p *LocalProvider) WithOpts(...types.ClusterOpts) types.E2EClusterProvider { return p }

// Create starts the control plane, the reference core and the driver, and
// returns the admin kubeconfig path.
func (p *LocalProvider) Create(ctx context.Context, _ ...string) (string, error) {
	c, err := cluster.Start(ctx, cluster.Options{})
	if err != nil {
		return "", err
	}
	p.c = c
	if err := c.InstallDriverRBAC(ctx); err != nil {
		return "", err
	}
	if p.binDir, err = os.MkdirTemp("", "metallb-iad-e2e-bin-"); err != nil {
		return "", err
	}
	if err := cluster.BuildDriver(p.binDir); err != nil {
		return "", err
	}
	cctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	mgr, err := bootstrap.NewManager(c.Config, &bootstrap.Options{Controller: "core", MetricsBindAddress: "0", HealthProbeBindAddress: "0"}, nil)
	if err != nil {
		return "", err
	}
	if err := core.Setup(cctx, mgr); err != nil {
		return "", err
	}
	go func() { _ = mgr.Start(cctx) }()
	for _, name := range cluster.Controllers {
		for i := 0; i < Replicas; i++ {
			if _, err := p.StartReplica(ctx, name); err != nil {
				return "", err
			}
		}
	}
	return c.Kubeconfig, nil
}

// CreateWithConfig implements types.E2EClusterProvider; the config is ignored.
func (p *LocalProvider) CreateWithConfig(ctx context.Context, _ string) (string, error) {
	return p.Create(ctx)
}

// StartReplica starts one more process of a controller and waits until it
// is ready.
func (p *LocalProvider) StartReplica(ctx context.Context, controller string) (*cluster.Driver, error) {
	// Short leases so failover takes seconds, not the default 15 s.
	d, err := p.c.StartDriver(ctx, p.binDir, controller,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms")
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := d.WaitReady(rctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.drivers[controller] = append(p.drivers[controller], d)
	p.mu.Unlock()
	return d, nil
}

// Replicas returns the live processes of a controller.
func (p *LocalProvider) Replicas(controller string) []*cluster.Driver {
	p.mu.Lock()
	defer p.mu.Unlock()
	var live []*cluster.Driver
	for _, d := range p.drivers[controller] {
		if !d.Exited() {
			live = append(live, d)
		}
	}
	p.drivers[controller] = live
	return append([]*cluster.Driver(nil), live...)
}

// Leader returns the replica of a controller that reports holding its lease
// (from its leader_election_master_status metric).
func (p *LocalProvider) Leader(controller string) (*cluster.Driver, error) {
	for _, d := range p.Replicas(controller) {
		resp, err := http.Get("http://" + d.MetricsAddr + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), fmt.Sprintf(`leader_election_master_status{name="metallb-iad-%s"} 1`, controller)) {
			return d, nil
		}
	}
	return nil, fmt.Errorf("no replica of %s is leader", controller)
}

// Cluster is the underlying local control plane.
func (p *LocalProvider) Cluster() *cluster.Cluster { return p.c }

// GetKubeconfig implements types.E2EClusterProvider.
func (p *LocalProvider) GetKubeconfig() string { return p.c.Kubeconfig }

// GenerateKubeconfig implements types.E2EClusterProvider.
func (p *LocalProvider) GenerateKubeconfig(...string) (string, error) { return p.c.Kubeconfig, nil }

// GetKubectlContext implements types.E2EClusterProvider.
func (p *LocalProvider) GetKubectlContext() string { return "" }

// KubernetesRestConfig implements types.E2EClusterProvider.
func (p *LocalProvider) KubernetesRestConfig() *rest.Config { return rest.CopyConfig(p.c.Config) }

// WaitForControlPlane implements types.E2EClusterProvider: Create already
// waited for every component.
func (p *LocalProvider) WaitForControlPlane(context.Context, klient.Client) error { return nil }

// ExportLogs copies every process log into dest.
func (p *LocalProvider) ExportLogs(_ context.Context, dest string) error {
	logs, err := filepath.Glob(filepath.Join(p.c.Dir, "*.log"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err == nil {
			err = os.WriteFile(filepath.Join(dest, filepath.Base(l)), b, 0o644)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Destroy stops every process and removes temporary files.
func (p *LocalProvider) Destroy(context.Context) error {
	for _, name := range cluster.Controllers {
		for _, d := range p.Replicas(name) {
			d.Stop(10 * time.Second)
		}
	}
	if p.cancel != nil {
		p.cancel()
	}
	if p.c != nil {
		p.c.Stop()
	}
	if p.binDir != "" {
		_ = os.RemoveAll(p.binDir)
	}
	return nil
}
