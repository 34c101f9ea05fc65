package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/parking"
	"github.com/cozystack/metallb-iad/test/manifests"
)

// Controllers are the driver's four controllers, one binary each.
var Controllers = []string{"class", "claim", "service", "ipaddress"}

// BuildFlags are the flags the Dockerfile and `make build` build the
// controllers with: a static binary without symbol table or DWARF.
var BuildFlags = []string{"-trimpath", "-ldflags=-s -w"}

// DriverNamespace is where the local control plane runs the driver: its
// leases and (by default) its placeholder Services live there.
const DriverNamespace = "metallb-iad-system"

// SharingKeySecret is the Secret, in DriverNamespace, the controllers derive
// MetalLB sharing keys from (config/rbac grants them exactly this one).
const SharingKeySecret = "metallb-iad-sharing-key"

// SharingKeyReader reports whether a controller derives MetalLB sharing
// keys (and so reads SharingKeySecret): all but the class controller.
func SharingKeyReader(controller string) bool { return controller != "class" }

// BuildDriver builds the four controller binaries into dir the way the
// image builds them (BuildFlags, without cgo), so tests and benchmarks run
// what ships (the Go build cache makes a rebuild quick).
func BuildDriver(dir string) error {
	for _, c := range Controllers {
		args := append([]string{"build"}, BuildFlags...)
		cmd := exec.Command("go", append(args, "-o", filepath.Join(dir, c), "./cmd/"+c)...)
		cmd.Dir = manifests.Root()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v: %s", c, err, out)
		}
	}
	return nil
}

// driverObjects ensures namespace exists and returns the driver's objects
// as config/default renders them.
func (c *Cluster) driverObjects(ctx context.Context, namespace string) ([]*unstructured.Unstructured, error) {
	if err := c.EnsureNamespace(ctx, namespace); err != nil {
		return nil, err
	}
	return manifests.Build("config/default")
}

// InstallDriverRBAC applies the driver's ServiceAccounts, ClusterRoles and
// lease Roles (config/rbac through kustomize, in DriverNamespace), so the
// binaries can run as their own ServiceAccounts with least privilege.
func (c *Cluster) InstallDriverRBAC(ctx context.Context) error {
	objs, err := c.driverObjects(ctx, DriverNamespace)
	if err != nil {
		return err
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "Deployment":
			continue // the namespace exists; the binaries run as processes here
		}
		if err := c.Client.Patch(ctx, o, client.Apply, client.FieldOwner("metallb-iad-test"), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// StartForDriver starts the control plane (Start), grants the driver's
// ServiceAccounts their rights (InstallDriverRBAC) and creates namespaces:
// what a package testing one of the controllers needs first. On an error
// it stops what it started.
func StartForDriver(ctx context.Context, opts Options, namespaces ...string) (*Cluster, error) {
	c, err := Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("start the control plane: %w", err)
	}
	if err := c.InstallDriverRBAC(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("grant the driver's RBAC: %w", err)
	}
	for _, ns := range namespaces {
		if err := c.EnsureNamespace(ctx, ns); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// InstallPlaceholderRBAC grants the controllers their rights in another
// placeholder namespace than DriverNamespace, as the chart does for its
// placeholderNamespace value: the Roles generated from the controllers'
// namespaced RBAC markers and their RoleBindings, copied into namespace.
func (c *Cluster) InstallPlaceholderRBAC(ctx context.Context, namespace string) error {
	objs, err := c.driverObjects(ctx, namespace)
	if err != nil {
		return err
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Role", "RoleBinding":
		default:
			continue
		}
		if strings.HasSuffix(o.GetName(), "-leader-election") || o.GetNamespace() == MetalLBNamespace {
			continue // the lease stays in DriverNamespace, MetalLB's kinds in MetalLB's
		}
		o.SetNamespace(namespace)
		if err := c.Client.Patch(ctx, o, client.Apply, client.FieldOwner("metallb-iad-test"), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s in %s: %w", o.GetKind(), o.GetName(), namespace, err)
		}
	}
	return nil
}

// Driver is one controller binary running as its own ServiceAccount.
type Driver struct {
	*Process
	Controller  string
	MetricsAddr string
	HealthAddr  string
	// PprofAddr serves the binary's /debug/pprof profiles when
	// METALLB_IAD_PPROF is set (written to <name>.pprof in the process log
	// directory too); empty otherwise.
	PprofAddr string
}

// StartDriver runs one controller binary from binDir against the cluster,
// as the ServiceAccount metallb-iad-<controller>, with leader election on.
func (c *Cluster) StartDriver(ctx context.Context, binDir, controller string, extraArgs ...string) (*Driver, error) {
	kc, err := c.ServiceAccountKubeconfig(DriverNamespace, "metallb-iad-"+controller)
	if err != nil {
		return nil, err
	}
	mp, err := FreePort()
	if err != nil {
		return nil, err
	}
	hp, err := FreePort()
	if err != nil {
		return nil, err
	}
	d := &Driver{Controller: controller,
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", mp), HealthAddr: fmt.Sprintf("127.0.0.1:%d", hp)}
	args := []string{"--kubeconfig", kc}
	if SharingKeyReader(controller) {
		// As the chart runs them: the first controller to start creates
		// the sharing-key Secret, the others read it.
		args = append(args, "--sharing-key-secret", SharingKeySecret, "--sharing-key-create")
	}
	args = append(append(args,
		"--leader-elect=true",
		"--leader-election-namespace", DriverNamespace,
		"--placeholder-namespace", DriverNamespace,
		"--metallb-namespace", MetalLBNamespace,
		"--metrics-bind-address", d.MetricsAddr,
		// Plain HTTP, which the harness scrapes; a test of the secure
		// endpoint passes --metrics-secure=true after it.
		"--metrics-secure=false",
		// Envoy Gateway's default mode runs Gateways' Services there.
		"--gateway-implementation-namespaces", EnvoyGatewayNamespace,
		"--health-probe-bind-address", d.HealthAddr,
		"--zap-log-level", driverLogLevel(),
		// Milliseconds matter when a log is read beside the audit log.
		"--zap-time-encoding", "rfc3339nano",
	), extraArgs...)
	name := controller
	if _, err := os.Stat(filepath.Join(c.Dir, name+".log")); err == nil {
		name = fmt.Sprintf("%s-%d", controller, time.Now().UnixNano())
	}
	if os.Getenv("METALLB_IAD_PPROF") != "" {
		pp, err := FreePort()
		if err != nil {
			return nil, err
		}
		d.PprofAddr = fmt.Sprintf("127.0.0.1:%d", pp)
		args = append(args, "--pprof-bind-address", d.PprofAddr)
		if err := os.WriteFile(filepath.Join(c.Dir, name+".pprof"), []byte(d.PprofAddr+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	if d.Process, err = startProcess(c.Dir, name, filepath.Join(binDir, controller), DriverEnv(), args...); err != nil {
		return nil, err
	}
	return d, nil
}

// DriverEnv is what $METALLB_IAD_DRIVER_ENV adds to every controller
// binary's environment and no other process's: space-separated NAME=value
// pairs, such as the Go runtime's GOGC or GOMEMLIMIT, to measure the driver
// under them beside an unchanged MetalLB and control plane.
func DriverEnv() []string {
	return strings.Fields(os.Getenv("METALLB_IAD_DRIVER_ENV"))
}

// StartDriverReady starts a controller binary (StartDriver) and waits up to
// two minutes until it is ready. A binary that lost the race for one of its
// ports to another process is started again on new ports.
func (c *Cluster) StartDriverReady(ctx context.Context, binDir, controller string, extraArgs ...string) (*Driver, error) {
	for attempt := 1; ; attempt++ {
		d, err := c.StartDriver(ctx, binDir, controller, extraArgs...)
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err = d.WaitReady(rctx)
		cancel()
		if err == nil && !d.exitsSoon() {
			return d, nil
		}
		if err == nil {
			b, _ := os.ReadFile(d.LogPath)
			err = fmt.Errorf("%s exited once ready: %s", d.Controller, b)
		}
		lostPort := d.Exited() && AddrInUse(d.Process)
		d.Kill()
		if attempt == 3 || !lostPort {
			return nil, err
		}
	}
}

// exitsSoon reports whether the binary exits within a second of being
// ready: the manager starts its metrics listener beside the probes, so a
// binary whose metrics port another process took just now can answer
// /readyz and then stop (StartDriverReady starts it again on new ports).
func (d *Driver) exitsSoon() bool {
	select {
	case <-d.Done():
		return true
	case <-time.After(time.Second):
		return false
	}
}

// WaitReady waits until the binary's /readyz answers 200.
func (d *Driver) WaitReady(ctx context.Context) error {
	for {
		if d.Exited() {
			b, _ := os.ReadFile(d.LogPath)
			return fmt.Errorf("%s exited: %s", d.Controller, b)
		}
		resp, err := http.Get("http://" + d.HealthAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			b, _ := os.ReadFile(d.LogPath)
			return fmt.Errorf("%s not ready: %w; log:\n%s", d.Controller, ctx.Err(), b)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ControllerOptions are the options a test runs one of the driver's
// controllers with in process (bootstrap.Controller.NewManager), as its
// binary would run, but without leader election or metrics and probe
// listeners, and with several managers of one controller allowed.
func ControllerOptions(placeholderNamespace string) *bootstrap.Options {
	return &bootstrap.Options{
		MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		PlaceholderNamespace: placeholderNamespace, MetalLBNamespace: MetalLBNamespace,
		ParkingPool: parking.DefaultPool, SkipNameValidation: true,
	}
}

// StartController runs the controller ctl in a manager of its own, as the
// identity of cfg, until the test ends (ControllerOptions), and waits until
// the manager's cache has synced. It returns the manager.
func StartController(t testing.TB, ctl bootstrap.Controller, cfg *rest.Config, placeholderNamespace string) ctrl.Manager {
	t.Helper()
	mgr, err := ctl.NewManager(cfg, ControllerOptions(placeholderNamespace))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done, "%s manager", ctl.Name)
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	require.True(t, mgr.GetCache().WaitForCacheSync(syncCtx), "the %s manager's cache syncs", ctl.Name)
	return mgr
}

// RunWithManager starts mgr, runs the package's tests, then stops the manager
// and waits for it. It returns the tests' exit code; a manager that failed is
// reported on stderr.
func RunWithManager(ctx context.Context, mgr interface {
	Start(context.Context) error
}, run func() int) int {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	return code
}

// driverLogLevel is the controllers' log level: $METALLB_IAD_LOG_LEVEL
// (debug shows every decision logged at V(1)), info when empty.
func driverLogLevel() string {
	if l := os.Getenv("METALLB_IAD_LOG_LEVEL"); l != "" {
		return l
	}
	return "info"
}
