package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/core"
	"github.com/cozystack/metallb-iad/test/manifests"
	"github.com/cozystack/metallb-iad/test/node"
)

// The node path: a one-node cluster on this machine (test/node), MetalLB's
// controller installed in it from the chart inside MetalLB's module with a
// locally built image, the driver installed from chart/metallb-iad with the
// Helm SDK, two replicas per controller, and the reference core run
// in-process against the cluster, as on kind.
const (
	driverRelease  = "metallb-iad"
	metallbRelease = "metallb"
)

// NodeProvider is the e2e-framework cluster provider of the node path.
type NodeProvider struct {
	name   string
	n      *node.Node
	cancel context.CancelFunc
}

var _ types.E2EClusterProvider = &NodeProvider{}

// SetDefaults implements types.E2EClusterProvider.
func (p *NodeProvider) SetDefaults() types.E2EClusterProvider { return p }

// WithName implements types.E2EClusterProvider.
func (p *NodeProvider) WithName(name string) types.E2EClusterProvider { p.name = name; return p }

// WithVersion is accepted for the interface; the version is the one the
// tools module pins.
func (p *NodeProvider) WithVersion(string) types.E2EClusterProvider { return p }

// WithPath is accepted for the interface; binaries come from bin/.
func (p *NodeProvider) WithPath(string) types.E2EClusterProvider { return p }

// WithOpts implements types.E2EClusterProvider.
func (p *NodeProvider) WithOpts(...types.ClusterOpts) types.E2EClusterProvider { return p }

// Create starts the node, installs MetalLB and the driver's chart, starts
// the reference core, and returns the admin kubeconfig path.
func (p *NodeProvider) Create(ctx context.Context, _ ...string) (string, error) {
	n, err := node.Start(ctx, os.Stderr)
	if err != nil {
		return "", err
	}
	p.n = n
	t := time.Now()
	if err := p.installMetalLB(ctx); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "node: MetalLB's controller installed (%s)\n", time.Since(t).Round(100*time.Millisecond))
	t = time.Now()
	if _, err := p.InstallDriver(ctx, nil); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "node: chart/metallb-iad installed (%s)\n", time.Since(t).Round(100*time.Millisecond))
	cctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	mgr, err := core.NewManager(n.Cluster.Config)
	if err != nil {
		return "", err
	}
	go func() { _ = mgr.Start(cctx) }()
	return n.Cluster.Kubeconfig, nil
}

// helmConfig is a Helm SDK action configuration for namespace ns.
func (p *NodeProvider) helmConfig(ns string) (*action.Configuration, error) {
	cfg := new(action.Configuration)
	if err := cfg.Init(kube.GetConfig(p.n.Cluster.Kubeconfig, "", ns), ns, "secret", func(string, ...any) {}); err != nil {
		return nil, err
	}
	// The API server is built without version stamps and reports
	// v0.0.0-master, which charts' kubeVersion constraints refuse: tell
	// Helm the version it was built from.
	caps := chartutil.DefaultCapabilities.Copy()
	major, minor, _ := strings.Cut(strings.TrimPrefix(p.n.KubeVersion, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	caps.KubeVersion = chartutil.KubeVersion{Version: p.n.KubeVersion, Major: major, Minor: minor}
	cfg.Capabilities = caps
	return cfg, nil
}

func (p *NodeProvider) installMetalLB(ctx context.Context) error {
	dir, err := moduleDir("go.universe.tf/metallb")
	if err != nil {
		return err
	}
	ch, err := loader.Load(filepath.Join(dir, "charts", "metallb"))
	if err != nil {
		return err
	}
	cfg, err := p.helmConfig(cluster.MetalLBNamespace)
	if err != nil {
		return err
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = metallbRelease, cluster.MetalLBNamespace, true
	in.Wait, in.Timeout = true, 5*time.Minute
	_, err = in.RunWithContext(ctx, ch, map[string]any{
		"speaker": map[string]any{"enabled": false},
		// The local control plane installed MetalLB's CRDs already, without
		// the conversion webhook MetalLB's certificate rotation insists on
		// patching: run without its webhooks, as the local provider does.
		"crds": map[string]any{"enabled": false, "validationFailurePolicy": "Ignore"},
		"controller": map[string]any{
			"webhookMode": "disabled",
			"image": map[string]any{
				"repository": node.MetalLBImage, "tag": p.n.MetalLBVersion, "pullPolicy": "IfNotPresent"}},
	})
	if err != nil {
		return fmt.Errorf("helm install MetalLB: %w", err)
	}
	return nil
}

// driverValues are the chart values of the node path: the local image, two
// replicas per controller with short leases (failover in seconds), the
// metrics Services, and CRDs left to the core (the local control plane
// installed them). over is merged on top, per controller.
func driverValues(over map[string]map[string]any) map[string]any {
	ctrls := map[string]any{}
	for _, c := range cluster.Controllers {
		v := map[string]any{
			"replicas":  2,
			"extraArgs": []any{"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"},
		}
		for k, x := range over[c] {
			v[k] = x
		}
		ctrls[c] = v
	}
	return map[string]any{
		"image":           map[string]any{"repository": node.DriverImageRepo, "tag": node.DriverImageTag},
		"imagePullPolicy": "IfNotPresent",
		"installCRDs":     false,
		"controllers":     ctrls,
		"metrics":         map[string]any{"service": map[string]any{"enabled": true}},
	}
}

// driverChart loads chart/metallb-iad and the Helm configuration of the
// driver's release namespace.
func (p *NodeProvider) driverChart() (*chart.Chart, *action.Configuration, error) {
	ch, err := loader.Load(filepath.Join(manifests.Root(), "chart", "metallb-iad"))
	if err != nil {
		return nil, nil, err
	}
	cfg, err := p.helmConfig(kindNamespace)
	if err != nil {
		return nil, nil, err
	}
	return ch, cfg, nil
}

// InstallDriver installs chart/metallb-iad with the Helm SDK and waits until
// every Deployment is available.
func (p *NodeProvider) InstallDriver(ctx context.Context, over map[string]map[string]any) (*release.Release, error) {
	ch, cfg, err := p.driverChart()
	if err != nil {
		return nil, err
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = driverRelease, kindNamespace, true
	in.Wait, in.Timeout = true, 5*time.Minute
	rel, err := in.RunWithContext(ctx, ch, driverValues(over))
	if err != nil {
		return nil, fmt.Errorf("helm install chart/metallb-iad: %w", err)
	}
	return rel, nil
}

// UpgradeDriver runs `helm upgrade` of the driver's release with values.
func (p *NodeProvider) UpgradeDriver(ctx context.Context, over map[string]map[string]any) (*release.Release, error) {
	ch, cfg, err := p.driverChart()
	if err != nil {
		return nil, err
	}
	up := action.NewUpgrade(cfg)
	up.Namespace, up.Wait, up.Timeout = kindNamespace, true, 5*time.Minute
	rel, err := up.RunWithContext(ctx, driverRelease, ch, driverValues(over))
	if err != nil {
		return nil, fmt.Errorf("helm upgrade chart/metallb-iad: %w", err)
	}
	return rel, nil
}

// UninstallDriver runs `helm uninstall` of the driver's release and waits
// for its resources to go.
func (p *NodeProvider) UninstallDriver() error {
	cfg, err := p.helmConfig(kindNamespace)
	if err != nil {
		return err
	}
	un := action.NewUninstall(cfg)
	un.Wait, un.Timeout = true, 5*time.Minute
	if _, err := un.Run(driverRelease); err != nil {
		return fmt.Errorf("helm uninstall: %w", err)
	}
	return nil
}

// Node is the running node.
func (p *NodeProvider) Node() *node.Node { return p.n }

// CreateWithConfig implements types.E2EClusterProvider; the config is ignored.
func (p *NodeProvider) CreateWithConfig(ctx context.Context, _ string) (string, error) {
	return p.Create(ctx)
}

// GetKubeconfig implements types.E2EClusterProvider.
func (p *NodeProvider) GetKubeconfig() string { return p.n.Cluster.Kubeconfig }

// GenerateKubeconfig implements types.E2EClusterProvider.
func (p *NodeProvider) GenerateKubeconfig(...string) (string, error) {
	return p.n.Cluster.Kubeconfig, nil
}

// GetKubectlContext implements types.E2EClusterProvider.
func (p *NodeProvider) GetKubectlContext() string { return "" }

// KubernetesRestConfig implements types.E2EClusterProvider.
func (p *NodeProvider) KubernetesRestConfig() *rest.Config {
	return rest.CopyConfig(p.n.Cluster.Config)
}

// WaitForControlPlane implements types.E2EClusterProvider: Create already
// waited for the node and both charts.
func (p *NodeProvider) WaitForControlPlane(context.Context, klient.Client) error { return nil }

// ExportLogs copies the node's component logs into dest.
func (p *NodeProvider) ExportLogs(_ context.Context, dest string) error {
	return copyLogs(node.LogsDir(), dest)
}

// Destroy tears the node down and reports anything it left on the machine.
func (p *NodeProvider) Destroy(ctx context.Context) error {
	if p.cancel != nil {
		p.cancel()
	}
	if p.n == nil {
		return nil
	}
	if os.Getenv("KEEP_NODE_LOGS") != "" {
		dest := filepath.Join(os.TempDir(), "metallb-iad-node-logs")
		_ = copyLogs(node.LogsDir(), dest)
		fmt.Fprintf(os.Stderr, "node: logs copied to %s\n", dest)
	}
	t := time.Now()
	err := p.n.Stop(ctx)
	fmt.Fprintf(os.Stderr, "node: torn down and checked (%s)\n", time.Since(t).Round(100*time.Millisecond))
	return err
}

func copyLogs(src, dest string) error {
	logs, err := filepath.Glob(filepath.Join(src, "*.log"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dest, filepath.Base(l)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
