package e2e

import (
	"context"
	"fmt"
	"os"
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
	"sigs.k8s.io/e2e-framework/third_party/kind"
)

// The kind path: a dual-stack kind cluster, our image (E2E_IMAGE, default
// ghcr.io/cozystack/metallb-iad:e2e, built by `make docker-build IMG=...`)
// and, with E2E_CORE_SRC, the real core's image (E2E_CORE_IMAGE, built from
// that source by its own Dockerfile) loaded into the nodes; then the chart
// path (charts.go), the same code as the node provider's. E2E_KIND_IMAGE
// picks the node image; E2E_LOGS is where the cluster's logs go at the end.

func kindImage() string {
	if v := os.Getenv("E2E_IMAGE"); v != "" {
		return v
	}
	return "ghcr.io/cozystack/metallb-iad:e2e"
}

func kindCoreImage() string {
	if v := os.Getenv("E2E_CORE_IMAGE"); v != "" {
		return v
	}
	return coreImageRef
}

// kindConfig is the cluster's kind configuration: dual-stack, so that
// RequireDualStack Services get both families.
const kindConfig = `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  ipFamily: dual
`

func kindSetup() ([]env.Func, error) {
	src, err := coreSource()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "metallb-iad-kind-")
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "kind.yaml")
	if err := os.WriteFile(cfgPath, []byte(kindConfig), 0o600); err != nil {
		return nil, err
	}
	var opts []support.ClusterOpts
	if img := os.Getenv("E2E_KIND_IMAGE"); img != "" {
		opts = append(opts, kind.WithImage(img))
	}
	fns := []env.Func{
		envfuncs.CreateClusterWithConfig(kind.NewProvider(), clusterName, cfgPath, opts...),
		envfuncs.LoadImageToCluster(clusterName, kindImage()),
	}
	if src != "" {
		fns = append(fns, envfuncs.LoadImageToCluster(clusterName, kindCoreImage()))
	}
	// From here on, the same code as the node provider's.
	fns = append(fns, func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		charted = &chartStack{
			kubeconfig: cfg.KubeconfigFile(), config: cfg.Client().RESTConfig(),
			driverImage: kindImage(), coreSrc: src, coreImage: kindCoreImage(),
			// The real core's chart brings the CRDs; for the reference core
			// ours do.
			ourCRDs:       src == "",
			metallbValues: map[string]any{"speaker": map[string]any{"enabled": false}},
		}
		return ctx, charted.install(ctx)
	})
	return fns, nil
}

func kindLogsDir() string {
	if v := os.Getenv("E2E_LOGS"); v != "" {
		return v
	}
	return filepath.Join(os.TempDir(), "metallb-iad-e2e-logs")
}

func kindFinish() []env.Func {
	return []env.Func{
		func(ctx context.Context, _ *envconf.Config) (context.Context, error) {
			if charted != nil {
				charted.stop()
			}
			return ctx, nil
		},
		envfuncs.ExportClusterLogs(clusterName, kindLogsDir()),
		envfuncs.DestroyCluster(clusterName),
	}
}

// kindFleet kills controller pods, on kind and on the node; the Deployment
// replaces them.
type kindFleet struct{ k client.Client }

func (f kindFleet) placeholderNamespace() string { return holdsNamespace }

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
