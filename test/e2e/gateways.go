package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cozystack/metallb-iad/test/cluster"
)

// Envoy Gateway on the chart path (node and kind): its CRDs installed
// from the chart in its module, its certificates by its own certgen as a
// Job, and its controller as a Deployment of its image, which the node
// holds (built from the binary `make tools` built) and kind pulls. In a
// pod its fixed paths, /certs and the ServiceAccount's, are ordinary
// mounts.

// gatewayCRDsRelease names the render of Envoy Gateway's CRD chart.
const gatewayCRDsRelease = "gateway-crds"

// envoyGatewayImage is the controller's image at the pinned release.
func envoyGatewayImage() (string, error) {
	v, err := cluster.EnvoyGatewayVersion()
	if err != nil {
		return "", err
	}
	return cluster.EnvoyGatewayImage + ":" + v, nil
}

// runEnvoyGateway installs Envoy Gateway once and runs its controller in
// mode (rolled out again when the mode changes).
func (s *chartStack) runEnvoyGateway(ctx context.Context, mode cluster.EnvoyGatewayMode) error {
	image, err := envoyGatewayImage()
	if err != nil {
		return err
	}
	c, err := client.New(s.config, client.Options{})
	if err != nil {
		return err
	}
	if !s.gatewayInstalled {
		if err := s.installEnvoyGateway(ctx, c, image); err != nil {
			return err
		}
		s.gatewayInstalled = true
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.EnvoyGatewayNamespace, Name: "envoy-gateway-config"},
		Data:       map[string]string{"envoy-gateway.yaml": cluster.EnvoyGatewayConfig(mode)},
	}
	if err := createOrUpdate(ctx, c, cm, func(cur *corev1.ConfigMap) { cur.Data = cm.Data }); err != nil {
		return err
	}
	d := envoyGatewayDeployment(image, mode)
	if err := createOrUpdate(ctx, c, d, func(cur *appsv1.Deployment) { cur.Spec = d.Spec }); err != nil {
		return err
	}
	if err := rolledOut(ctx, c, client.ObjectKeyFromObject(d)); err != nil {
		return err
	}
	return cluster.WaitGatewayClassAccepted(ctx, c, nil, "kubectl -n "+cluster.EnvoyGatewayNamespace+" logs deploy/envoy-gateway")
}

// installEnvoyGateway installs the CRDs, the controller's ServiceAccount
// (cluster-admin: a stand-in, not under test), its certificates and the
// GatewayClass.
func (s *chartStack) installEnvoyGateway(ctx context.Context, c client.Client, image string) error {
	dir, err := cluster.EnvoyGatewayModuleDir()
	if err != nil {
		return err
	}
	if err := s.installGatewayCRDs(ctx, filepath.Join(dir, "charts", "gateway-crds-helm")); err != nil {
		return err
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cluster.EnvoyGatewayNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.EnvoyGatewayNamespace, Name: "envoy-gateway"}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "envoy-gateway"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: cluster.EnvoyGatewayNamespace, Name: "envoy-gateway"}},
		},
		certgenJob(image),
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if err := kwait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		j := &batchv1.Job{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: cluster.EnvoyGatewayNamespace, Name: "envoy-gateway-certgen"}, j); err != nil {
			return false, err
		}
		if j.Status.Failed > 0 {
			return false, fmt.Errorf("envoy-gateway certgen failed: kubectl -n %s logs job/envoy-gateway-certgen", cluster.EnvoyGatewayNamespace)
		}
		return j.Status.Succeeded > 0, nil
	}); err != nil {
		return err
	}
	return cluster.EnsureEnvoyGatewayClass(ctx, c)
}

// installGatewayCRDs renders the CRD chart as `helm template` does and
// applies its CRDs: as a release they would not fit Helm's release Secret
// (1 MiB), which is why Envoy Gateway's own docs apply them this way too.
func (s *chartStack) installGatewayCRDs(ctx context.Context, dir string) error {
	ch, err := loader.Load(dir)
	if err != nil {
		return err
	}
	cfg, err := s.helmConfig(cluster.EnvoyGatewayNamespace)
	if err != nil {
		return err
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace = gatewayCRDsRelease, cluster.EnvoyGatewayNamespace
	in.DryRun, in.ClientOnly, in.Replace = true, true, true
	rel, err := in.RunWithContext(ctx, ch, map[string]any{"crds": map[string]any{
		"gatewayAPI": map[string]any{"enabled": true}, "envoyGateway": map[string]any{"enabled": true}}})
	if err != nil {
		return fmt.Errorf("helm template %s: %w", dir, err)
	}
	f, err := os.CreateTemp("", "gateway-crds-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(rel.Manifest); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	_, err = envtest.InstallCRDs(s.config, envtest.CRDInstallOptions{Paths: []string{f.Name()}, ErrorIfPathMissing: true})
	return err
}

// restricted is the container security context Pod Security "restricted"
// asks for.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: new(false),
		RunAsNonRoot:             new(true),
		RunAsUser:                new(int64(65532)),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		ReadOnlyRootFilesystem:   new(true),
	}
}

var namespaceEnv = corev1.EnvVar{Name: "ENVOY_GATEWAY_NAMESPACE",
	ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}

func certgenJob(image string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.EnvoyGatewayNamespace, Name: "envoy-gateway-certgen"},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32(2)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				ServiceAccountName: "envoy-gateway",
				RestartPolicy:      corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "certgen", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
					Args:            []string{"certgen", "--disable-topology-injector"},
					Env:             []corev1.EnvVar{namespaceEnv},
					SecurityContext: restricted(),
				}},
			}},
		},
	}
}

func envoyGatewayDeployment(image string, mode cluster.EnvoyGatewayMode) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": "envoy-gateway"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.EnvoyGatewayNamespace, Name: "envoy-gateway"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			// One controller at a time: the old one stops before the new
			// mode's starts.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"e2e.metallb-iad/mode": string(mode)}},
				Spec: corev1.PodSpec{
					ServiceAccountName: "envoy-gateway",
					Containers: []corev1.Container{{
						Name: "envoy-gateway", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            []string{"server", "--config-path", "/config/envoy-gateway.yaml"},
						Env:             []corev1.EnvVar{namespaceEnv},
						SecurityContext: restricted(),
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: "/readyz", Port: intstr.FromInt32(8081)}}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "config", MountPath: "/config", ReadOnly: true},
							{Name: "certs", MountPath: "/certs", ReadOnly: true},
							{Name: "tmp", MountPath: "/tmp"},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "envoy-gateway-config"}}}},
						{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "envoy-gateway"}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
}

// createOrUpdate creates obj, or applies update to the one that exists.
func createOrUpdate[T client.Object](ctx context.Context, c client.Client, obj T, update func(T)) error {
	err := c.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	cur := obj.DeepCopyObject().(T)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
		return err
	}
	update(cur)
	return c.Update(ctx, cur)
}

// rolledOut waits until the Deployment runs its latest template, ready.
func rolledOut(ctx context.Context, c client.Client, key client.ObjectKey) error {
	return kwait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, key, d); err != nil {
			return false, err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
			d.Status.ReadyReplicas == want && d.Status.Replicas == want, nil
	})
}
