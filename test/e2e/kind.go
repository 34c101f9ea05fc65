package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/support"
	"sigs.k8s.io/e2e-framework/third_party/helm"
	"sigs.k8s.io/e2e-framework/third_party/kind"

	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/core"
	"github.com/cozystack/metallb-iad/test/manifests"
)

// The kind path: a kind cluster, MetalLB from the chart inside its Go module,
// our image loaded into the nodes, our chart installed with the CRDs, and the
// reference core run in-process against the cluster. E2E_IMAGE names the
// image to load (default ghcr.io/cozystack/metallb-iad:e2e, built by
// `make docker-build IMG=...`); E2E_KIND_IMAGE picks the node image.
const kindNamespace = "metallb-iad-system"

func kindImage() string {
	if v := os.Getenv("E2E_IMAGE"); v != "" {
		return v
	}
	return "ghcr.io/cozystack/metallb-iad:e2e"
}

func kindSetup() []env.Func {
	var opts []support.ClusterOpts
	if img := os.Getenv("E2E_KIND_IMAGE"); img != "" {
		opts = append(opts, kind.WithImage(img))
	}
	return []env.Func{
		envfuncs.CreateClusterWithOpts(kind.NewProvider(), clusterName, opts...),
		envfuncs.LoadImageToCluster(clusterName, kindImage()),
		installMetalLB,
		installDriverChart,
		startCoreAgainst,
	}
}

func kindFinish() []env.Func {
	return []env.Func{
		envfuncs.ExportClusterLogs(clusterName, filepath.Join(os.TempDir(), "metallb-iad-e2e-logs")),
		envfuncs.DestroyCluster(clusterName),
	}
}

func moduleDir(mod string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil {
		// MetalLB is a dependency of the tools module, not the main one.
		cmd := exec.Command("go", "mod", "download", "-json", mod)
		cmd.Dir = filepath.Join(manifests.Root(), "hack", "tools", "metallb")
		b, err2 := cmd.Output()
		if err2 != nil {
			return "", fmt.Errorf("locate %s: %v / %v", mod, err, err2)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"Dir":`) {
				return strings.Trim(strings.TrimSpace(strings.SplitN(l, ":", 2)[1]), `",`), nil
			}
		}
	}
	return strings.TrimSpace(string(out)), nil
}

func installMetalLB(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	dir, err := moduleDir("go.universe.tf/metallb")
	if err != nil {
		return ctx, err
	}
	h := helm.New(cfg.KubeconfigFile())
	err = h.RunInstall(helm.WithName("metallb"), helm.WithNamespace(cluster.MetalLBNamespace),
		helm.WithChart(filepath.Join(dir, "charts", "metallb")),
		helm.WithArgs("--create-namespace", "--set", "speaker.enabled=false"), helm.WithWait(), helm.WithTimeout("5m"))
	return ctx, err
}

func installDriverChart(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	repo, tag, _ := strings.Cut(kindImage(), ":")
	h := helm.New(cfg.KubeconfigFile())
	err := h.RunInstall(helm.WithName("metallb-iad"), helm.WithNamespace(kindNamespace),
		helm.WithChart(filepath.Join(manifests.Root(), "chart", "metallb-iad")),
		helm.WithArgs("--create-namespace", "--set", "installCRDs=true",
			"--set", "image.repository="+repo, "--set", "image.tag="+tag, "--set", "imagePullPolicy=IfNotPresent",
			"--set", "controllers.class.replicas=2", "--set", "controllers.claim.replicas=2",
			"--set", "controllers.service.replicas=2", "--set", "controllers.ipaddress.replicas=2"),
		helm.WithWait(), helm.WithTimeout("5m"))
	return ctx, err
}

func startCoreAgainst(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	mgr, err := core.NewManager(cfg.Client().RESTConfig())
	if err != nil {
		return ctx, err
	}
	go func() { _ = mgr.Start(context.Background()) }()
	return ctx, nil
}

// kindFleet kills controller pods; the Deployment replaces them.
type kindFleet struct{ k client.Client }

func (f kindFleet) placeholderNamespace() string { return kindNamespace }

func (f kindFleet) killLeader(ctx context.Context, controller string) (time.Duration, error) {
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: kindNamespace, Name: "metallb-iad-" + controller}
	if err := f.k.Get(ctx, key, lease); err != nil || lease.Spec.HolderIdentity == nil {
		return 0, fmt.Errorf("lease %s: %v", key, err)
	}
	old := *lease.Spec.HolderIdentity
	pod, _, _ := strings.Cut(old, "_") // controller-runtime's identity is <pod>_<uuid>
	start := time.Now()
	p := &corev1.Pod{}
	p.Namespace, p.Name = kindNamespace, pod
	if err := f.k.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
		return 0, err
	}
	return waitNewHolder(ctx, f.k, key, old, start)
}

func (f kindFleet) restart(ctx context.Context, controller string) error {
	_, err := f.killLeader(ctx, controller)
	return err
}

func (f kindFleet) stopAll(ctx context.Context, controller string) (func() error, error) {
	d := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: kindNamespace, Name: "metallb-iad-" + controller}
	if err := f.k.Get(ctx, key, d); err != nil {
		return nil, err
	}
	replicas := *d.Spec.Replicas
	scale := func(n int32) error {
		if err := f.k.Get(ctx, key, d); err != nil {
			return err
		}
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = &n
		return f.k.Patch(ctx, d, patch)
	}
	if err := scale(0); err != nil {
		return nil, err
	}
	// A terminating pod still reconciles until its process exits: the
	// controller is stopped only once no pod of it is left.
	ctx2, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		pods := &corev1.PodList{}
		err := f.k.List(ctx2, pods, client.InNamespace(kindNamespace), client.MatchingLabels{"app.kubernetes.io/component": controller})
		if err == nil && len(pods.Items) == 0 {
			break
		}
		select {
		case <-ctx2.Done():
			_ = scale(replicas)
			return nil, fmt.Errorf("the %s pods did not go: %w", controller, ctx2.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return func() error { return scale(replicas) }, nil
}
