package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/pkg/types"

	chartrender "github.com/cozystack/metallb-iad/test/chart"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// Replicas is how many processes of each controller the local provider runs,
// as the chart would run replicas: one leader, the rest on standby.
const Replicas = 2

// clusterName names the e2e cluster in the e2e-framework context.
const clusterName = "metallb-iad-e2e"

// LocalProvider is an e2e-framework cluster provider that runs everything on
// this machine (cluster.Stack): the local control plane with the real
// MetalLB controller, the reference core (in-process; the real one as a
// process with E2E_CORE_SRC), and the driver's four
// binaries as separate OS processes, Replicas each, with leader election on,
// each as its own ServiceAccount.
type LocalProvider struct {
	name string
	s    *cluster.Stack
	// gateways is Envoy Gateway, once a feature started it (StartGateways).
	gateways *cluster.EnvoyGateway
	// contour is Contour, once a feature started it (StartContour).
	contour *cluster.Contour
}

var _ types.E2EClusterProvider = &LocalProvider{}

// NewLocalProvider returns an unstarted local provider.
func NewLocalProvider() *LocalProvider { return &LocalProvider{} }

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
	// Short leases so failover takes seconds, not the default 15 s.
	src, err := coreSource()
	if err != nil {
		return "", err
	}
	s, err := cluster.StartStack(ctx, cluster.StackOptions{Replicas: Replicas, ReplicaArgs: cluster.FastFailoverArgs, CoreSrc: src})
	if err != nil {
		return "", err
	}
	p.s = s
	if err := installServicePolicies(ctx, s.Cluster); err != nil {
		s.Stop()
		return "", err
	}
	return s.Kubeconfig, nil
}

// servicePolicies are the chart's admission policies on Services and
// Gateways: the tenants' reserved fields and the bounds of the driver's
// own ServiceAccounts. The local provider installs them for the whole
// cluster, as the chart does on the other providers, so every story's
// driver writes go through them.
var servicePolicies = []string{
	"metallb-iad-reserved-service-fields",
	"metallb-iad-reserved-gateway-infrastructure",
	"metallb-iad-driver-service-writes",
}

// installServicePolicies creates servicePolicies and their bindings as the
// chart renders them for the local driver (release metallb-iad in
// cluster.DriverNamespace, the placeholders there too).
func installServicePolicies(ctx context.Context, c *cluster.Cluster) error {
	r, err := chartrender.Render(chartrender.Release{Namespace: cluster.DriverNamespace}, "")
	if err != nil {
		return err
	}
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		for _, name := range servicePolicies {
			o := r.Get(kind, name)
			if o == nil {
				return errors.New("the chart renders no " + kind + " " + name)
			}
			if err := c.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
	}
	return nil
}

// CreateWithConfig implements types.E2EClusterProvider; the config is ignored.
func (p *LocalProvider) CreateWithConfig(ctx context.Context, _ string) (string, error) {
	return p.Create(ctx)
}

// StartReplica starts one more process of a controller and waits until it
// is ready.
func (p *LocalProvider) StartReplica(ctx context.Context, controller string, extraArgs ...string) (*cluster.Driver, error) {
	return p.s.StartReplica(ctx, controller, extraArgs...)
}

// Replicas returns the live processes of a controller.
func (p *LocalProvider) Replicas(controller string) []*cluster.Driver {
	return p.s.Replicas(controller)
}

// Leader returns the replica of a controller that holds its lease.
func (p *LocalProvider) Leader(controller string) (*cluster.Driver, error) {
	return p.s.Leader(controller)
}

// Cluster is the underlying local control plane.
func (p *LocalProvider) Cluster() *cluster.Cluster { return p.s.Cluster }

// GetKubeconfig implements types.E2EClusterProvider.
func (p *LocalProvider) GetKubeconfig() string { return p.s.Kubeconfig }

// GenerateKubeconfig implements types.E2EClusterProvider.
func (p *LocalProvider) GenerateKubeconfig(...string) (string, error) { return p.s.Kubeconfig, nil }

// GetKubectlContext implements types.E2EClusterProvider.
func (p *LocalProvider) GetKubectlContext() string { return "" }

// KubernetesRestConfig implements types.E2EClusterProvider.
func (p *LocalProvider) KubernetesRestConfig() *rest.Config { return rest.CopyConfig(p.s.Config) }

// WaitForControlPlane implements types.E2EClusterProvider: Create already
// waited for every component.
func (p *LocalProvider) WaitForControlPlane(context.Context, klient.Client) error { return nil }

// ExportLogs copies every process log into dest.
func (p *LocalProvider) ExportLogs(_ context.Context, dest string) error {
	logs, err := filepath.Glob(filepath.Join(p.s.Dir, "*.log"))
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
	if p.gateways != nil {
		p.gateways.Stop()
	}
	if p.contour != nil {
		p.contour.Stop()
	}
	p.s.Stop()
	return nil
}

// StartContour runs Contour's gateway provisioner beside the control
// plane, once (test/cluster.StartContour).
func (p *LocalProvider) StartContour(ctx context.Context) error {
	if p.contour != nil && !p.contour.Exited() {
		return nil
	}
	ct, err := p.s.Cluster.StartContour(ctx)
	if err != nil {
		return err
	}
	p.contour = ct
	return nil
}

// StartGateways runs Envoy Gateway in mode beside the control plane,
// replacing the one running in another mode (test/cluster.StartEnvoyGateway).
func (p *LocalProvider) StartGateways(ctx context.Context, mode cluster.EnvoyGatewayMode) error {
	if p.gateways != nil && p.gateways.Mode == mode && !p.gateways.Process.Exited() {
		return nil
	}
	if p.gateways != nil {
		p.gateways.Stop()
	}
	eg, err := p.s.Cluster.StartEnvoyGateway(ctx, mode)
	p.gateways = eg
	return err
}
