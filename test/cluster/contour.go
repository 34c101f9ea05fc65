package cluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Contour, the second Gateway API implementation of the e2e feature
// `gateway` (hack/tools/contour), runs beside the local control plane as
// processes of the one binary `make gateway-tools` builds: its gateway
// provisioner creates a Gateway's Service (envoy-<gateway>, in the
// Gateway's namespace, labelled gateway.networking.k8s.io/gateway-name),
// and one `contour serve` per Gateway copies that Service's addresses into
// the Gateway's status.addresses, as the Deployment the provisioner would
// run for it does in a cluster. No proxy pod runs here. Both run as a
// ServiceAccount of their own (a kubeconfig with its token), so the
// admission policies judge their writes as in a cluster.
const (
	// ContourNamespace is the provisioner's own namespace.
	ContourNamespace = "projectcontour"
	// ContourClass is the GatewayClass StartContour creates.
	ContourClass = "contour"
	// ContourControllerName is the controllerName the class names.
	ContourControllerName = "projectcontour.io/gateway-controller"
)

// Contour is a running Contour gateway provisioner and its per-Gateway
// status writers.
type Contour struct {
	Provisioner *Process
	dir         string
	kubeconfig  string

	mu     sync.Mutex
	serves map[string]*Process
}

// StartContour installs Contour's CRDs (the Gateway API's come from Envoy
// Gateway's bundle, which StartEnvoyGateway installs too), its namespace
// and ServiceAccount (cluster-admin: a stand-in for the implementation,
// not under test) and the GatewayClass, then starts the provisioner and
// waits until it accepts the class.
func (c *Cluster) StartContour(ctx context.Context) (*Contour, error) {
	bin := filepath.Join(BinDir(), "contour")
	crds := []string{filepath.Join(BinDir(), "envoy-gateway-crds.yaml"), filepath.Join(BinDir(), "contour-crds.yaml")}
	for _, f := range append([]string{bin}, crds...) {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%s is missing: run `make gateway-tools` first", f)
		}
	}
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("install the Gateway API and Contour CRDs: %w", err)
	}
	dir, err := os.MkdirTemp(c.Dir, "contour-")
	if err != nil {
		return nil, err
	}
	token, ca, err := c.implementationAccount(ctx, ContourNamespace, "contour")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, tokenKubeconfig(c.Config.Host, token, ca), 0o600); err != nil {
		return nil, err
	}
	p, err := StartProcess(c.Dir, "contour-provisioner", bin, "gateway-provisioner",
		"--no-incluster", "--kubeconfig="+kubeconfig, "--metrics-addr=0", "--gateway-controller-name="+ContourControllerName)
	if err != nil {
		return nil, err
	}
	ct := &Contour{Provisioner: p, dir: dir, kubeconfig: kubeconfig, serves: map[string]*Process{}}
	gc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "GatewayClass",
		"metadata":   map[string]any{"name": ContourClass},
		"spec":       map[string]any{"controllerName": ContourControllerName},
	}}
	if err := c.Client.Create(ctx, gc); err != nil && !apierrors.IsAlreadyExists(err) {
		ct.Stop()
		return nil, err
	}
	if err := WaitClassAccepted(ctx, c.Client, ContourClass, p.Done(), p.LogPath); err != nil {
		ct.Stop()
		return nil, err
	}
	return ct, nil
}

// Serve runs the status writer of the Gateway namespace/name (`contour
// serve` with that gatewayRef), once: it writes the Gateway's
// status.addresses from the Service envoy-<name>, and keeps writing them
// across the Gateway's re-creates.
func (ct *Contour) Serve(namespace, name string) error {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	key := namespace + "/" + name
	if p := ct.serves[key]; p != nil && !p.Exited() {
		return nil
	}
	config := filepath.Join(ct.dir, "serve-"+namespace+"-"+name+".yaml")
	body := fmt.Sprintf("gateway:\n  gatewayRef:\n    namespace: %s\n    name: %s\n", namespace, name)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		return err
	}
	ports := make([]string, 3)
	for i := range ports {
		port, err := FreePort()
		if err != nil {
			return err
		}
		ports[i] = strconv.Itoa(port)
	}
	args := []string{"serve", "-c", config, "--kubeconfig=" + ct.kubeconfig, "--insecure", "--disable-leader-election",
		"--xds-address=127.0.0.1", "--xds-port=" + ports[0],
		"--http-address=127.0.0.1", "--http-port=" + ports[1], "--health-address=127.0.0.1", "--health-port=" + ports[1],
		"--debug-http-address=127.0.0.1", "--debug-http-port=" + ports[2],
		"--envoy-service-name=envoy-" + name, "--envoy-service-namespace=" + namespace,
		// The Gateway API versions Envoy Gateway's bundle no longer serves.
		"--disable-feature=tlsroutes", "--disable-feature=tcproutes", "--disable-feature=backendtlspolicies", "--disable-feature=grpcroutes"}
	p, err := StartProcess(filepath.Dir(ct.dir), "contour-serve-"+namespace+"-"+name, filepath.Join(BinDir(), "contour"), args...)
	if err != nil {
		return err
	}
	ct.serves[key] = p
	return nil
}

// Stop ends the provisioner and every status writer.
func (ct *Contour) Stop() {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	for _, p := range ct.serves {
		p.Stop(5 * time.Second)
	}
	ct.Provisioner.Stop(5 * time.Second)
}

// Exited says the provisioner is no longer running.
func (ct *Contour) Exited() bool { return ct.Provisioner.Exited() }

// tokenKubeconfig is a kubeconfig reaching host as the bearer of token.
func tokenKubeconfig(host, token string, ca []byte) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: implementation
  user:
    token: %s
contexts:
- name: local
  context: {cluster: local, user: implementation}
current-context: local
`, host, base64.StdEncoding.EncodeToString(ca), token)
}
