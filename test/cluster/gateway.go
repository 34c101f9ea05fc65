package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cozystack/metallb-iad/test/manifests"
)

// Envoy Gateway, a Gateway API implementation, runs beside the local
// control plane for the e2e feature `gateway`: the controller `make tools`
// builds from the Go module proxy (hack/tools/envoy-gateway), as a process,
// with the CRDs rendered from the chart in its module. No proxy pod runs
// here (there is no kubelet): what the driver sees of a Gateway is the
// Service the controller creates for it, and the Gateway's
// status.addresses it copies from that Service.
const (
	// EnvoyGatewayNamespace is the controller's own namespace.
	EnvoyGatewayNamespace = "envoy-gateway-system"
	// EnvoyGatewayClass is the GatewayClass StartEnvoyGateway creates.
	EnvoyGatewayClass = "eg"
	// EnvoyGatewayControllerName is the controllerName the class names.
	EnvoyGatewayControllerName = "gateway.envoyproxy.io/gatewayclass-controller"
)

// EnvoyGatewayImage is Envoy Gateway's image repository; the tag is
// EnvoyGatewayVersion. The node imports an image of that name built from
// the binary `make tools` builds; kind pulls the real one.
const EnvoyGatewayImage = "docker.io/envoyproxy/gateway"

// EnvoyGatewayVersion is the release hack/tools/envoy-gateway pins.
func EnvoyGatewayVersion() (string, error) {
	b, err := os.ReadFile(filepath.Join(manifests.Root(), "hack", "tools", "envoy-gateway", "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "require" && f[1] == "github.com/envoyproxy/gateway" {
			return f[2], nil
		}
	}
	return "", fmt.Errorf("hack/tools/envoy-gateway/go.mod requires no github.com/envoyproxy/gateway")
}

// EnvoyGatewayModuleDir is Envoy Gateway's module at that release, in the
// module cache (downloaded if needed): its charts.
func EnvoyGatewayModuleDir() (string, error) {
	return ModuleDir(filepath.Join(manifests.Root(), "hack", "tools", "envoy-gateway"), "github.com/envoyproxy/gateway")
}

// ModuleDir is where the module cache holds module (path or path@version),
// downloaded if needed, as `go mod download` resolves it in dir.
func ModuleDir(dir, module string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", err
	}
	if mod.Error != "" || mod.Dir == "" {
		return "", fmt.Errorf("%s: %s", module, mod.Error)
	}
	return mod.Dir, nil
}

// EnvoyGatewayMode is where Envoy Gateway runs a Gateway's Service.
type EnvoyGatewayMode string

const (
	// GatewayNamespaceMode runs it in the Gateway's namespace, owned by the
	// Gateway.
	GatewayNamespaceMode EnvoyGatewayMode = "GatewayNamespace"
	// ControllerNamespaceMode, Envoy Gateway's default, runs it in
	// EnvoyGatewayNamespace, labelled with the Gateway's name and namespace.
	ControllerNamespaceMode EnvoyGatewayMode = "ControllerNamespace"
)

// EnvoyGateway is a running Envoy Gateway controller.
type EnvoyGateway struct {
	Process *Process
	Mode    EnvoyGatewayMode
}

// Stop ends the controller.
func (e *EnvoyGateway) Stop() { e.Process.Stop(5 * time.Second) }

// StartEnvoyGateway installs the Gateway API and Envoy Gateway CRDs, the
// controller's namespace and ServiceAccount (cluster-admin: it is a
// stand-in for the implementation, not under test), its certificates
// (certgen), and the GatewayClass, then starts the controller in mode and
// waits until it accepts the class.
//
// The controller insists on two fixed paths: its xDS certificates in
// /certs and in-cluster credentials under
// /var/run/secrets/kubernetes.io/serviceaccount. It gets them in a mount
// namespace of its own (util-linux unshare; a user namespace when not
// root), over a root of bind mounts, so nothing on the host is written.
func (c *Cluster) StartEnvoyGateway(ctx context.Context, mode EnvoyGatewayMode) (*EnvoyGateway, error) {
	bin := filepath.Join(BinDir(), "envoy-gateway")
	crds := filepath.Join(BinDir(), "envoy-gateway-crds.yaml")
	for _, f := range []string{bin, crds} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%s is missing: run `make gateway-tools` first", f)
		}
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		return nil, fmt.Errorf("Envoy Gateway needs unshare (util-linux) for its own mount namespace: %w", err)
	}
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("install the Gateway API CRDs: %w", err)
	}
	dir, err := os.MkdirTemp(c.Dir, "envoy-gateway-")
	if err != nil {
		return nil, err
	}
	sa, err := c.envoyGatewayAccount(ctx, filepath.Join(dir, "serviceaccount"))
	if err != nil {
		return nil, err
	}
	certs := filepath.Join(dir, "certs")
	if err := c.envoyGatewayCerts(ctx, bin, dir, certs); err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "envoy-gateway.yaml")
	if err := os.WriteFile(config, []byte(EnvoyGatewayConfig(mode)), 0o600); err != nil {
		return nil, err
	}
	host, port, err := c.apiHostPort()
	if err != nil {
		return nil, err
	}
	args := []string{"--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		args = append([]string{"--user", "--map-root-user"}, args...)
	}
	args = append(args, "/bin/sh", "-euc", ownRootScript, "envoy-gateway",
		sa, certs, host, port, filepath.Join(dir, "root"), bin, "server", "--config-path", config)
	p, err := StartProcess(c.Dir, "envoy-gateway", "unshare", args...)
	if err != nil {
		return nil, err
	}
	e := &EnvoyGateway{Process: p, Mode: mode}
	if err := c.acceptClass(ctx, p.Done(), p.LogPath); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

// ownRootScript runs a command ($6 and on) chrooted into a tmpfs root
// mounted at $5 that binds every directory of the host's root, plus /certs
// ($2) and the ServiceAccount files ($1) at their in-cluster paths, with
// the API server at $3:$4. It runs inside `unshare --mount`, so its mounts are its own.
const ownRootScript = `
sa=$1 certs=$2 host=$3 port=$4 root=$5; shift 5
mkdir -p "$root"
mount -t tmpfs envoy-gateway-root "$root"
for d in /*; do
	n=${d#/}
	if [ -L "$d" ]; then ln -s "$(readlink "$d")" "$root/$n"
	elif [ -d "$d" ] && [ "$n" != run ]; then mkdir "$root/$n" && mount --rbind "$d" "$root/$n"
	fi
done
mkdir -p "$root/run/secrets/kubernetes.io/serviceaccount" "$root/certs"
cp "$sa"/* "$root/run/secrets/kubernetes.io/serviceaccount/"
cp "$certs"/* "$root/certs/"
export KUBERNETES_SERVICE_HOST="$host" KUBERNETES_SERVICE_PORT="$port"
exec chroot "$root" "$@"
`

// EnvoyGatewayConfig is the controller's configuration file in mode.
func EnvoyGatewayConfig(mode EnvoyGatewayMode) string {
	return fmt.Sprintf(`apiVersion: gateway.envoyproxy.io/v1alpha1
kind: EnvoyGateway
gateway:
  controllerName: %s
provider:
  type: Kubernetes
  kubernetes:
    deploy:
      type: %s
    leaderElection:
      disable: true
logging:
  level:
    default: info
`, EnvoyGatewayControllerName, mode)
}

// envoyGatewayAccount creates the controller's namespace and
// ServiceAccount, and writes its in-cluster files (token, ca.crt,
// namespace) into dir.
func (c *Cluster) envoyGatewayAccount(ctx context.Context, dir string) (string, error) {
	token, ca, err := c.implementationAccount(ctx, EnvoyGatewayNamespace, "envoy-gateway")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for name, b := range map[string][]byte{"token": []byte(token), "ca.crt": ca, "namespace": []byte(EnvoyGatewayNamespace)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// implementationAccount creates a Gateway API implementation's namespace
// and ServiceAccount name there, bound to cluster-admin (a stand-in, not
// under test), and returns a token of it and the API server's CA.
func (c *Cluster) implementationAccount(ctx context.Context, namespace, name string) (token string, ca []byte, err error) {
	if err := c.EnsureNamespace(ctx, namespace); err != nil {
		return "", nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}
	if err := c.Client.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return "", nil, err
	}
	tok, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(24 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	ca = c.Config.CAData
	if len(ca) == 0 && c.Config.CAFile != "" {
		if ca, err = os.ReadFile(c.Config.CAFile); err != nil {
			return "", nil, err
		}
	}
	return tok.Status.Token, ca, nil
}

// envoyGatewayCerts runs certgen twice: into the cluster (the Secrets the
// controller reads, in its namespace) and locally (the files of /certs).
func (c *Cluster) envoyGatewayCerts(ctx context.Context, bin, dir, certs string) error {
	env := append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "ENVOY_GATEWAY_NAMESPACE="+EnvoyGatewayNamespace)
	for _, args := range [][]string{
		{"certgen", "--disable-topology-injector"},
		{"certgen", "--local", "--config-home", dir},
	} {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("envoy-gateway %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	local := filepath.Join(dir, "certs", "envoy-gateway")
	if err := os.Rename(local, certs+".tmp"); err != nil {
		return fmt.Errorf("certgen --local wrote no %s: %w", local, err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "certs")); err != nil {
		return err
	}
	return os.Rename(certs+".tmp", certs)
}

// apiHostPort is the API server's address, as in-cluster config wants it.
func (c *Cluster) apiHostPort() (host, port string, err error) {
	h := strings.TrimPrefix(c.Config.Host, "https://")
	i := strings.LastIndex(h, ":")
	if i < 0 {
		return "", "", fmt.Errorf("API server address %q has no port", c.Config.Host)
	}
	return h[:i], h[i+1:], nil
}

// acceptClass creates the GatewayClass and waits until the controller
// accepts it (or exits, closing done; its log is at logPath).
func (c *Cluster) acceptClass(ctx context.Context, done <-chan struct{}, logPath string) error {
	if err := EnsureEnvoyGatewayClass(ctx, c.Client); err != nil {
		return err
	}
	return WaitGatewayClassAccepted(ctx, c.Client, done, logPath)
}

// EnsureEnvoyGatewayClass creates the GatewayClass EnvoyGatewayClass, with
// an EnvoyProxy of no replicas as its parameters: the tests look at the
// Service of a Gateway, never at traffic, and no proxy image is pulled.
func EnsureEnvoyGatewayClass(ctx context.Context, c client.Client) error {
	proxy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.envoyproxy.io/v1alpha1",
		"kind":       "EnvoyProxy",
		"metadata":   map[string]any{"name": "no-proxy-pods", "namespace": EnvoyGatewayNamespace},
		"spec": map[string]any{"provider": map[string]any{"type": "Kubernetes", "kubernetes": map[string]any{
			"envoyDeployment": map[string]any{"replicas": int64(0)},
		}}},
	}}
	gc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "GatewayClass",
		"metadata":   map[string]any{"name": EnvoyGatewayClass},
		"spec": map[string]any{
			"controllerName": EnvoyGatewayControllerName,
			"parametersRef": map[string]any{"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy",
				"name": "no-proxy-pods", "namespace": EnvoyGatewayNamespace},
		},
	}}
	for _, o := range []client.Object{proxy, gc} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// WaitGatewayClassAccepted waits until Envoy Gateway accepts its class, or
// done closes (the controller exited; its log is at logPath).
func WaitGatewayClassAccepted(ctx context.Context, c client.Client, done <-chan struct{}, logPath string) error {
	return WaitClassAccepted(ctx, c, EnvoyGatewayClass, done, logPath)
}

// WaitClassAccepted waits until the GatewayClass class is accepted, or
// done closes (its controller exited; its log is at logPath).
func WaitClassAccepted(ctx context.Context, c client.Client, class string, done <-chan struct{}, logPath string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	gc := &unstructured.Unstructured{}
	gc.SetAPIVersion("gateway.networking.k8s.io/v1")
	gc.SetKind("GatewayClass")
	for {
		if err := c.Get(ctx, client.ObjectKey{Name: class}, gc); err == nil && accepted(gc) {
			return nil
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("the controller of GatewayClass %s exited before accepting it: %s", class, tail(b, 2000))
		case <-ctx.Done():
			return fmt.Errorf("GatewayClass %s is not Accepted (%s): %w", class, logPath, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// accepted says the object's status has condition Accepted True.
func accepted(o *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Accepted" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
