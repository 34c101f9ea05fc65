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
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/core"
	"github.com/cozystack/metallb-iad/test/manifests"
)

// The chart path, shared by the kind and node providers: once a cluster
// exists and holds the images, the same code installs MetalLB from its own
// chart, the core (the reference core in this process, or the real core
// from its chart with E2E_CORE_SRC), and chart/metallb-iad, all with the
// Helm SDK. The features that need real Deployments (helm upgrade,
// rollout restart, uninstall and reinstall) drive it through charted.
const (
	driverRelease  = "metallb-iad"
	metallbRelease = "metallb"
	coreRelease    = "address-controller"
	// kindNamespace is the driver's release namespace on kind and the node.
	kindNamespace = "metallb-iad-system"
	// holdsNamespace holds the placeholders, apart from the release as the
	// chart allows, so uninstalling shows they outlive it.
	holdsNamespace = "metallb-iad-holds"
	coreNamespace  = "address-controller"
)

// charted is the chart path of the running provider (kind or node); nil on
// the local provider.
var charted *chartStack

// chartStack installs and upgrades the charts on one cluster.
type chartStack struct {
	kubeconfig string
	config     *rest.Config
	// kubeVersion, when set, is the version Helm renders for (the node's
	// API server is built without version stamps).
	kubeVersion string
	// metallbValues are the provider's values for MetalLB's chart.
	metallbValues map[string]any
	// driverImage is the driver image the cluster holds (repository:tag).
	driverImage string
	// coreSrc and coreImage: the real core's source tree (its chart) and
	// the image built from it; coreSrc empty runs the reference core.
	coreSrc, coreImage string
	// ourCRDs installs the CRDs with our chart (installCRDs): for the
	// reference core on a cluster that has none.
	ourCRDs bool

	stopCore context.CancelFunc
	// gatewayInstalled: Envoy Gateway's CRDs, certificates and class are
	// in (runEnvoyGateway).
	gatewayInstalled bool
}

// coreSource is E2E_CORE_SRC as an absolute path: the real core's source
// tree (address-controller), or "" for the reference core.
func coreSource() (string, error) {
	src := os.Getenv("E2E_CORE_SRC")
	if src == "" {
		return "", nil
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(abs, "chart", "address-controller", "Chart.yaml")); err != nil {
		return "", fmt.Errorf("E2E_CORE_SRC=%s is not the address-controller source tree: %w", src, err)
	}
	return abs, nil
}

// install installs MetalLB, the core and the driver, in that order.
func (s *chartStack) install(ctx context.Context) error {
	t := time.Now()
	if err := s.installMetalLB(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "e2e: MetalLB's chart installed (%s)\n", time.Since(t).Round(100*time.Millisecond))
	t = time.Now()
	if err := s.installCore(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "e2e: the core runs (%s)\n", time.Since(t).Round(100*time.Millisecond))
	t = time.Now()
	if _, err := s.InstallDriver(ctx, nil); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "e2e: chart/metallb-iad installed (%s)\n", time.Since(t).Round(100*time.Millisecond))
	return nil
}

// stop stops the reference core, if this process runs it.
func (s *chartStack) stop() {
	if s.stopCore != nil {
		s.stopCore()
	}
}

// helmConfig is a Helm SDK action configuration for namespace ns.
func (s *chartStack) helmConfig(ns string) (*action.Configuration, error) {
	cfg := new(action.Configuration)
	if err := cfg.Init(kube.GetConfig(s.kubeconfig, "", ns), ns, "secret", func(string, ...any) {}); err != nil {
		return nil, err
	}
	if s.kubeVersion != "" {
		caps := chartutil.DefaultCapabilities.Copy()
		major, minor, _ := strings.Cut(strings.TrimPrefix(s.kubeVersion, "v"), ".")
		minor, _, _ = strings.Cut(minor, ".")
		caps.KubeVersion = chartutil.KubeVersion{Version: s.kubeVersion, Major: major, Minor: minor}
		cfg.Capabilities = caps
	}
	return cfg, nil
}

// installChart installs a chart directory as release name in ns and waits
// until its workloads are ready.
func (s *chartStack) installChart(ctx context.Context, dir, name, ns string, values map[string]any) (*release.Release, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	cfg, err := s.helmConfig(ns)
	if err != nil {
		return nil, err
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = name, ns, true
	in.Wait, in.Timeout = true, 5*time.Minute
	rel, err := in.RunWithContext(ctx, ch, values)
	if err != nil {
		return nil, fmt.Errorf("helm install %s: %w", name, err)
	}
	return rel, nil
}

// metallbChartDir is MetalLB's chart at the release the tests run
// (METALLB_VERSION, as `make tools` built it), from its Go module.
func metallbChartDir() (string, error) {
	v := cluster.MetalLBVersion()
	if env := os.Getenv("METALLB_VERSION"); env != "" {
		v = env
	}
	if v == "" {
		return "", fmt.Errorf("no MetalLB version: set METALLB_VERSION or run make tools")
	}
	// Outside any module: the module cache alone.
	dir, err := cluster.ModuleDir(os.TempDir(), "go.universe.tf/metallb@"+v)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "charts", "metallb"), nil
}

func (s *chartStack) installMetalLB(ctx context.Context) error {
	dir, err := metallbChartDir()
	if err != nil {
		return err
	}
	if err := s.grantMetalLBPodReader(ctx); err != nil {
		return err
	}
	values := map[string]any{
		// The BGP backend is not exercised: no frr-k8s (v0.16 turns it on).
		"frrk8s": map[string]any{"enabled": false},
	}
	for k, v := range s.metallbValues {
		values[k] = v
	}
	_, err = s.installChart(ctx, dir, metallbRelease, cluster.MetalLBNamespace, values)
	return err
}

// grantMetalLBPodReader lets MetalLB's controller read its own Pod, which
// v0.16 and later do at start-up: MetalLB's chart grants that only with the
// speaker, which the tests leave out (nothing here announces addresses).
func (s *chartStack) grantMetalLBPodReader(ctx context.Context) error {
	c, err := client.New(s.config, client.Options{})
	if err != nil {
		return err
	}
	ns := cluster.MetalLBNamespace
	name := "metallb-iad-e2e-pod-reader"
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: metallbRelease + "-controller"}}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// installCore runs the core: the real one from its chart and image when
// E2E_CORE_SRC names its source, else the reference core in this process.
func (s *chartStack) installCore(ctx context.Context) error {
	if s.coreSrc == "" {
		mgr, err := core.NewManager(s.config)
		if err != nil {
			return err
		}
		cctx, cancel := context.WithCancel(context.Background())
		s.stopCore = cancel
		go func() { _ = mgr.Start(cctx) }()
		return nil
	}
	_, err := s.installChart(ctx, filepath.Join(s.coreSrc, "chart", "address-controller"), coreRelease, coreNamespace, map[string]any{
		"image":           s.coreImage,
		"imagePullPolicy": "IfNotPresent",
	})
	return err
}

// driverValues are the chart values of the chart path: the image the
// cluster holds, two replicas per controller with short leases (failover in
// seconds), the metrics Services, the placeholders in their own namespace,
// Envoy Gateway's namespace as a Gateway implementation's, and the CRDs
// from our chart only when asked (ourCRDs). over is merged on top, per controller.
func (s *chartStack) driverValues(over map[string]map[string]any) map[string]any {
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
	repo, tag, _ := strings.Cut(s.driverImage, ":")
	return map[string]any{
		"image":                map[string]any{"repository": repo, "tag": tag},
		"imagePullPolicy":      "IfNotPresent",
		"installCRDs":          s.ourCRDs,
		"placeholderNamespace": holdsNamespace,
		"controllers":          ctrls,
		"metrics":              map[string]any{"service": map[string]any{"enabled": true}},
		// Envoy Gateway's default mode runs Gateways' Services there.
		"gatewayImplementationNamespaces": []any{cluster.EnvoyGatewayNamespace},
	}
}

func (s *chartStack) driverChart() (*chart.Chart, *action.Configuration, error) {
	ch, err := loader.Load(filepath.Join(manifests.Root(), "chart", "metallb-iad"))
	if err != nil {
		return nil, nil, err
	}
	cfg, err := s.helmConfig(kindNamespace)
	if err != nil {
		return nil, nil, err
	}
	return ch, cfg, nil
}

// InstallDriver installs chart/metallb-iad and waits until every
// Deployment is available.
func (s *chartStack) InstallDriver(ctx context.Context, over map[string]map[string]any) (*release.Release, error) {
	return s.installChart(ctx, filepath.Join(manifests.Root(), "chart", "metallb-iad"), driverRelease, kindNamespace, s.driverValues(over))
}

// UpgradeDriver runs `helm upgrade` of the driver's release with values.
func (s *chartStack) UpgradeDriver(ctx context.Context, over map[string]map[string]any) (*release.Release, error) {
	ch, cfg, err := s.driverChart()
	if err != nil {
		return nil, err
	}
	up := action.NewUpgrade(cfg)
	up.Namespace, up.Wait, up.Timeout = kindNamespace, true, 5*time.Minute
	rel, err := up.RunWithContext(ctx, driverRelease, ch, s.driverValues(over))
	if err != nil {
		return nil, fmt.Errorf("helm upgrade chart/metallb-iad: %w", err)
	}
	return rel, nil
}

// UninstallDriver runs `helm uninstall` of the driver's release and waits
// for its resources to go.
func (s *chartStack) UninstallDriver() error {
	cfg, err := s.helmConfig(kindNamespace)
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
