// Package cluster is the project's real local control plane: etcd,
// kube-apiserver (dual-stack Service CIDR, RBAC, ValidatingAdmissionPolicy),
// kube-controller-manager (garbage collector and namespace controllers) and
// the real MetalLB controller, all built from the Go module proxy into
// bin/k8s by `make tools`. Integration tests, the e2e suite, benchmarks and
// the demo use it; it installs our CRDs (from config/crd, through kustomize)
// and MetalLB's, and hands out clients as admin, tenant or ServiceAccount.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/test/manifests"
)

const (
	// MetalLBNamespace is where MetalLB looks for its configuration.
	MetalLBNamespace = "metallb-system"
	// ServiceCIDRs is the dual-stack Service range of the API server.
	ServiceCIDRs = "10.96.0.0/16,fd00:10:96::/108"
)

// Options tune Start.
type Options struct {
	// NoMetalLB skips the MetalLB controller.
	NoMetalLB bool
	// NoControllerManager skips kube-controller-manager.
	NoControllerManager bool
	// NoCRDs installs neither the address model's CRDs nor MetalLB's, for
	// tests of what the driver does without them.
	NoCRDs bool
	// Dir holds kubeconfigs and process logs; a temporary folder if empty.
	Dir string
	// NoSignalHandler leaves SIGINT and SIGTERM to the caller, which must
	// then call Stop itself (the demo does, to end a user's Ctrl-C with
	// status 0). By default an interrupt stops the cluster and exits 130.
	NoSignalHandler bool
	// MetalLBLogLevel is the MetalLB controller's -log-level; when empty,
	// METALLB_IAD_METALLB_LOG_LEVEL, else "warn". The benchmarks use
	// "info": MetalLB logs each full pass over every Service only there.
	MetalLBLogLevel string
	// APIServer, when set, adjusts the API server before it starts (serving
	// address, certificates, flags): a one-node cluster needs pods to reach it.
	APIServer func(*envtest.APIServer) error
	// Controllers replaces the controllers kube-controller-manager runs
	// (garbagecollector and namespace when empty).
	Controllers []string
	// AuditPolicy, when set, is the API server's audit policy (YAML): it
	// then writes an audit log, as JSON lines, to AuditLogPath.
	AuditPolicy string
}

// Cluster is a running local control plane.
type Cluster struct {
	// Config is the admin's client configuration (system:masters).
	Config *rest.Config
	// Client is an admin client with the project's scheme.
	Client client.Client
	// Kubeconfig is the path of the admin's kubeconfig file.
	Kubeconfig string
	// Dir holds the kubeconfigs and the process logs.
	Dir string

	env     *envtest.Environment
	kcm     *Process
	metallb *Process
	// metallbRuns counts MetalLB restarts, to name the logs kept.
	metallbRuns int
	ownDir      bool

	// apiserver is kube-apiserver once RestartAPIServer replaced envtest's
	// process with one of ours, started with apiArgs.
	apiMu       sync.Mutex
	apiserver   *Process
	apiArgs     []string
	apiRestarts int

	// MetalLBLogLevel is the log level StartMetalLB gives the MetalLB
	// controller: $METALLB_IAD_METALLB_LOG_LEVEL, "warn" when empty. At
	// "info" it logs each full pass over every Service ("reprocessAll").
	MetalLBLogLevel string

	stopOnce sync.Once
	stopSig  chan struct{}
}

// AuditLogPath is where the API server writes its audit log when
// Options.AuditPolicy is set.
func (c *Cluster) AuditLogPath() string { return filepath.Join(c.Dir, "audit.log") }

// BinDir is where `make tools` puts the control-plane binaries.
func BinDir() string { return filepath.Join(manifests.Root(), "bin", "k8s") }

// Start brings the control plane up. Call Stop when done; an interrupt of
// the process stops it too (unless Options.NoSignalHandler).
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	bin := BinDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "metallb-controller"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("%s is missing from %s: run `make tools` first", b, bin)
		}
	}

	reapOrphans()
	// c is not the named result: every failed return sets that to nil, and
	// the deferred Stop must still see what was started.
	c := &Cluster{Dir: opts.Dir, stopSig: make(chan struct{}), MetalLBLogLevel: os.Getenv("METALLB_IAD_METALLB_LOG_LEVEL")}
	if opts.MetalLBLogLevel != "" {
		c.MetalLBLogLevel = opts.MetalLBLogLevel
	}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "metallb-iad-cluster-"); err != nil {
			return nil, err
		}
		c.ownDir = true
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	ours, err := manifests.CRDs("config/crd")
	if err != nil {
		return nil, err
	}
	theirs, err := manifests.CRDFiles(filepath.Join(bin, "metallb-crds"))
	if err != nil {
		return nil, err
	}
	crds := append(ours, theirs...)
	if opts.NoCRDs {
		crds = nil
	}
	c.env = &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		CRDs:                     crds,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 60 * time.Second,
		// A stopped cluster keeps nothing but its logs: etcd and the API
		// server get two seconds to exit before they are killed (a graceful
		// stop took the whole 20 s they were given before).
		ControlPlaneStopTimeout: 2 * time.Second,
	}
	c.env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", ServiceCIDRs)
	if err := c.choosePorts(); err != nil {
		return nil, err
	}
	if opts.AuditPolicy != "" {
		policy := filepath.Join(c.Dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(opts.AuditPolicy), 0o600); err != nil {
			return nil, err
		}
		args := c.env.ControlPlane.GetAPIServer().Configure()
		args.Set("audit-policy-file", policy)
		args.Set("audit-log-path", c.AuditLogPath())
		args.Set("audit-log-format", "json")
		args.Set("audit-log-mode", "blocking")
	}
	if opts.APIServer != nil {
		if err := opts.APIServer(c.env.ControlPlane.GetAPIServer()); err != nil {
			return nil, err
		}
	}
	if _, err := c.env.Start(); err != nil {
		return nil, fmt.Errorf("start the API server: %w", err)
	}
	if !opts.NoSignalHandler {
		c.watchInterrupt()
	}

	admin, err := c.env.AddUser(envtest.User{Name: "iad-admin", Groups: []string{"system:masters"}}, fastClient())
	if err != nil {
		return nil, err
	}
	c.Config = admin.Config()
	kc, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	if c.Client, err = client.New(c.Config, client.Options{Scheme: bootstrap.Scheme()}); err != nil {
		return nil, err
	}

	if !opts.NoControllerManager {
		if err := c.startControllerManager(ctx, opts.Controllers); err != nil {
			return nil, err
		}
	}
	if err := c.EnsureNamespace(ctx, MetalLBNamespace); err != nil {
		return nil, err
	}
	if !opts.NoMetalLB {
		if err := c.StartMetalLB(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) startControllerManager(ctx context.Context, controllers []string) error {
	if len(controllers) == 0 {
		controllers = []string{"garbagecollector", "namespace"}
	}
	var err error
	c.kcm, err = StartProcess(c.Dir, "kube-controller-manager", filepath.Join(BinDir(), "kube-controller-manager"),
		"--kubeconfig", c.Kubeconfig,
		"--authentication-kubeconfig", c.Kubeconfig,
		"--authorization-kubeconfig", c.Kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
	)
	if err != nil {
		return err
	}
	// kube-controller-manager has no insecure port left; it is ready when it
	// has not exited after the garbage collector's first discovery.
	select {
	case <-c.kcm.Done():
		return fmt.Errorf("kube-controller-manager exited at start; see %s", c.kcm.LogPath)
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// choosePorts gives etcd and the API server ports from FreePort rather than
// envtest's own, which come from the range of outgoing connections' source
// ports.
func (c *Cluster) choosePorts() error {
	var ports [3]int
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	if c.env.ControlPlane.Etcd == nil {
		c.env.ControlPlane.Etcd = &envtest.Etcd{}
	}
	etcd := c.env.ControlPlane.Etcd
	etcd.URL = &url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	etcd.Configure().Set("listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[1]))
	api := c.env.ControlPlane.GetAPIServer()
	api.SecureServing.Address = "127.0.0.1"
	api.SecureServing.Port = strconv.Itoa(ports[2])
	return nil
}

// StartMetalLB starts (or restarts) the MetalLB controller process. A
// restart keeps the old process's log beside the new one, as
// metallb-controller-<n>.log.
func (c *Cluster) StartMetalLB(ctx context.Context) error {
	c.metallb.Stop(5 * time.Second)
	if c.metallb != nil {
		c.metallbRuns++
		_ = os.Rename(c.metallb.LogPath, filepath.Join(c.Dir, fmt.Sprintf("metallb-controller-%d.log", c.metallbRuns)))
	}
	version := MetalLBVersion()
	if err := c.ensureMetalLBPod(ctx, version); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			return err
		}
		health, err := FreePort()
		if err != nil {
			return err
		}
		args := append([]string{
			"-kubeconfig", c.Kubeconfig,
			"-namespace", MetalLBNamespace,
			"-webhook-mode", "disabled",
			"-disable-cert-rotation",
			"-port", fmt.Sprint(port),
			"-log-level", metallbLogLevel(c.MetalLBLogLevel),
		}, metallbFlags(version, health)...)
		c.metallb, err = StartProcess(c.Dir, "metallb-controller", filepath.Join(BinDir(), "metallb-controller"), args...)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err = waitListening(wctx, c.metallb, fmt.Sprintf("127.0.0.1:%d", port))
		cancel()
		if err == nil {
			return nil
		}
		lostPort := c.metallb.Exited() && AddrInUse(c.metallb)
		c.metallb.Kill()
		if attempt == 3 || !lostPort {
			return fmt.Errorf("MetalLB controller did not come up (see %s): %w", c.metallb.LogPath, err)
		}
	}
}

// waitListening waits until p listens on addr, or p exits.
func waitListening(ctx context.Context, p *Process, addr string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return WaitTCP(ctx, addr)
}

func metallbLogLevel(l string) string {
	if l == "" {
		return "warn"
	}
	return l
}

// StopMetalLB stops the MetalLB controller (to simulate its outage).
func (c *Cluster) StopMetalLB() { c.metallb.Stop(5 * time.Second) }

// MetalLB is the running MetalLB controller process.
func (c *Cluster) MetalLB() *Process { return c.metallb }

// EnsureNamespace creates a namespace if it does not exist.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// AddUser returns a client configuration for a user authenticated by
// certificate, member of groups, with no other rights than RBAC gives.
func (c *Cluster) AddUser(name string, groups ...string) (*rest.Config, error) {
	u, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, fastClient())
	if err != nil {
		return nil, err
	}
	return rest.CopyConfig(u.Config()), nil
}

// UserKubeconfig writes a kubeconfig for a new user and returns its path.
func (c *Cluster) UserKubeconfig(name string, groups ...string) (string, error) {
	u, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, fastClient())
	if err != nil {
		return "", err
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	p := filepath.Join(c.Dir, name+".kubeconfig")
	return p, os.WriteFile(p, kc, 0o600)
}

// ServiceAccountConfig returns a client configuration that acts as the
// ServiceAccount namespace/name (through impersonation by the admin), with
// exactly the rights RBAC grants that ServiceAccount.
func (c *Cluster) ServiceAccountConfig(namespace, name string) *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}

// CRDs returns the CRDs the cluster was started with.
func (c *Cluster) CRDs() []*apiextensionsv1.CustomResourceDefinition { return c.env.CRDs }

// Stop ends every process the harness started and removes its temporary
// files (kept when KEEP_CLUSTER_LOGS is set, for debugging). Nothing of a
// cluster outlives it, so MetalLB, the controller manager and the API
// server are killed rather than asked to stop: their graceful shutdowns
// took about 20 seconds per cluster and saved nothing.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		close(c.stopSig)
		c.metallb.Kill()
		c.kcm.Kill()
		c.apiMu.Lock()
		c.apiserver.Kill()
		c.apiMu.Unlock()
		if c.env != nil {
			_ = c.env.Stop()
		}
		KillAll()
		if c.ownDir && os.Getenv("KEEP_CLUSTER_LOGS") == "" {
			_ = os.RemoveAll(c.Dir)
		}
	})
}

// watchInterrupt stops the cluster when the process is interrupted, so an
// aborted test run leaves no etcd or API server behind.
func (c *Cluster) watchInterrupt() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		defer signal.Stop(ch)
		select {
		case s := <-ch:
			fmt.Fprintf(os.Stderr, "\n%s: stopping the local control plane\n", s)
			c.Stop()
			os.Exit(130)
		case <-c.stopSig:
		}
	}()
}

// fastClient lifts client-go's default client-side rate limit (5 requests/s)
// for test clients: tests set up and tear down many objects at once.
func fastClient() *rest.Config { return &rest.Config{QPS: 500, Burst: 1000} }

// ErrNotReady is returned by waits that time out.
var ErrNotReady = errors.New("not ready")
