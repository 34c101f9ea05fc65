package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/cozystack/metallb-iad/test/node"
)

// The node path: a one-node cluster on this machine (test/node) holding
// locally built images, then the chart path (charts.go) as on kind:
// MetalLB's controller from the chart inside MetalLB's module, the core,
// and the driver from chart/metallb-iad. With E2E_CORE_SRC the real core's
// binary is built from that source into an image of its own.

// coreImageRef names the real core's image on the node and on kind.
const coreImageRef = "ghcr.io/cozystack/address-controller:e2e"

// NodeProvider is the e2e-framework cluster provider of the node path.
type NodeProvider struct {
	name   string
	n      *node.Node
	charts *chartStack
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

// Create starts the node, imports the real core's image when E2E_CORE_SRC
// is set, installs the charts, and returns the admin kubeconfig path.
func (p *NodeProvider) Create(ctx context.Context, _ ...string) (string, error) {
	src, err := coreSource()
	if err != nil {
		return "", err
	}
	n, err := node.Start(ctx, os.Stderr)
	if err != nil {
		return "", err
	}
	p.n = n
	if src != "" {
		if err := n.ImportBinaryImage(coreImageRef, src, "./cmd", "/manager"); err != nil {
			return "", fmt.Errorf("the real core's image: %w", err)
		}
	}
	p.charts = &chartStack{
		kubeconfig: n.Cluster.Kubeconfig, config: n.Cluster.Config, kubeVersion: n.KubeVersion,
		driverImage: node.DriverImageRepo + ":" + node.DriverImageTag,
		coreSrc:     src, coreImage: coreImageRef,
		// The local control plane installed the CRDs already.
		ourCRDs: false,
		metallbValues: map[string]any{
			"speaker": map[string]any{"enabled": false},
			// The local control plane installed MetalLB's CRDs already,
			// without the conversion webhook MetalLB's certificate rotation
			// insists on patching: run without its webhooks, as the local
			// provider does.
			"crds": map[string]any{"enabled": false, "validationFailurePolicy": "Ignore"},
			"controller": map[string]any{
				"webhookMode": "disabled",
				"image": map[string]any{
					"repository": node.MetalLBImage, "tag": n.MetalLBVersion, "pullPolicy": "IfNotPresent"}},
		},
	}
	if err := p.charts.install(ctx); err != nil {
		return "", err
	}
	charted = p.charts
	return n.Cluster.Kubeconfig, nil
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
	if p.charts != nil {
		p.charts.stop()
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
