//go:build integration

// Package binaries runs the four controller binaries, built as users build
// them, against the local control plane, each as its own ServiceAccount with
// the generated least-privilege RBAC.
package binaries

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
	"github.com/cozystack/metallb-iad/test/cluster"
)

var (
	c      *cluster.Cluster
	binDir string
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "metallb-iad-bin-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	binDir = dir
	if err := cluster.BuildDriver(binDir); err != nil {
		return 0, err
	}
	if c, err = cluster.StartForDriver(ctx, cluster.Options{NoMetalLB: true}); err != nil {
		return 0, err
	}
	defer c.Stop()
	return m.Run(), nil
}

func get(t require.TestingT, url string) (int, string) {
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEachBinaryHoldsItsOwnLease starts the four binaries, each as its own
// ServiceAccount, and checks that each becomes ready, serves probes and
// metrics, and holds its own Lease object.
func TestEachBinaryHoldsItsOwnLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	drivers := map[string]*cluster.Driver{}
	for _, name := range cluster.Controllers {
		d, err := c.StartDriverReady(ctx, binDir, name)
		require.NoError(t, err)
		t.Cleanup(func() { d.Stop(10 * time.Second) })
		drivers[name] = d
	}
	holders := map[string]bool{}
	for _, name := range cluster.Controllers {
		d := drivers[name]
		code, _ := get(t, "http://"+d.HealthAddr+"/healthz")
		assert.Equal(t, http.StatusOK, code, "%s /healthz", name)

		lease := &coordinationv1.Lease{}
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Namespace: cluster.DriverNamespace, Name: "metallb-iad-" + name}, lease))
			require.NotNil(t, lease.Spec.HolderIdentity)
			assert.NotEmpty(t, *lease.Spec.HolderIdentity)
		}, time.Minute, 100*time.Millisecond, "%s holds lease metallb-iad-%s", name, name)
		if lease.Spec.HolderIdentity != nil {
			holders[*lease.Spec.HolderIdentity] = true
		}

		// The controller starts, and its reconcile metrics appear, a moment
		// after the lease is taken.
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			code, body := get(t, "http://"+d.MetricsAddr+"/metrics")
			assert.Equal(t, http.StatusOK, code, "%s /metrics", name)
			assert.Contains(t, body, "controller_runtime_reconcile_total", "%s serves controller metrics", name)
			assert.Contains(t, body, "leader_election_master_status", "%s reports leadership", name)
		}, time.Minute, 100*time.Millisecond, "%s serves its metrics", name)
	}
	assert.Len(t, holders, len(cluster.Controllers), "four distinct holders, one per lease")
}

// TestSecondReplicaWaits starts a second replica of one controller: it must
// not take the lease while the first holds it, and takes it over when the
// first stops.
func TestSecondReplicaWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	key := client.ObjectKey{Namespace: cluster.DriverNamespace, Name: "metallb-iad-class"}
	first, err := c.StartDriverReady(ctx, binDir, "class")
	require.NoError(t, err)
	defer first.Stop(10 * time.Second)

	lease := &coordinationv1.Lease{}
	var holder string
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		require.NoError(t, c.Client.Get(ctx, key, lease))
		require.NotNil(t, lease.Spec.HolderIdentity)
		holder = *lease.Spec.HolderIdentity
		assert.NotEmpty(t, holder)
	}, time.Minute, 100*time.Millisecond)

	second, err := c.StartDriverReady(ctx, binDir, "class")
	require.NoError(t, err)
	defer second.Stop(10 * time.Second)
	_, body := get(t, "http://"+second.MetricsAddr+"/metrics")
	assert.Contains(t, body, `leader_election_master_status{name="metallb-iad-class"} 0`, "the second replica is not leader")

	first.Stop(10 * time.Second) // releases the lease on a clean stop
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		require.NoError(t, c.Client.Get(ctx, key, lease))
		require.NotNil(t, lease.Spec.HolderIdentity)
		assert.NotEqual(t, holder, *lease.Spec.HolderIdentity)
		assert.NotEmpty(t, *lease.Spec.HolderIdentity)
	}, time.Minute, 200*time.Millisecond, "the second replica takes the lease over")
}

// TestWarmStandby checks that a replica started with --warm-standby while
// another holds the lease watches all the same (its queue hears of a
// class) and makes no pass and no write, then takes over when the leader
// goes. Without the flag its queue would hear of nothing until then.
func TestWarmStandby(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	class := cluster.Class("warm-standby", iadv1alpha1.ReclaimDelete, "")
	require.NoError(t, c.Client.Create(ctx, class))
	defer func() { _ = c.Client.Delete(context.Background(), class) }()

	first, err := c.StartDriverReady(ctx, binDir, "class")
	require.NoError(t, err)
	defer first.Stop(10 * time.Second)
	require.Eventually(t, first.IsLeader, time.Minute, 100*time.Millisecond, "the first replica leads")

	second, err := c.StartDriverReady(ctx, binDir, "class", "--warm-standby")
	require.NoError(t, err)
	defer second.Stop(10 * time.Second)
	metrics := func() string {
		_, body := get(t, "http://"+second.MetricsAddr+"/metrics")
		return body
	}
	require.Eventually(t, func() bool {
		return metricSum(metrics(), `workqueue_adds_total{controller="class"`) > 0
	}, time.Minute, 100*time.Millisecond, "the standby's watches start: its queue hears of the class")
	assert.False(t, second.IsLeader(), "the standby does not lead")
	body := metrics()
	assert.Zero(t, metricSum(body, "controller_runtime_reconcile_total{"), "the standby makes no pass")
	for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		assert.Zero(t, metricSum(body, `rest_client_requests_total{`, `method="`+verb+`"`), "the standby writes nothing (%s)", verb)
	}

	first.Stop(10 * time.Second) // releases the lease on a clean stop
	assert.Eventually(t, func() bool {
		return metricSum(metrics(), "controller_runtime_reconcile_total{") > 0
	}, time.Minute, 200*time.Millisecond, "the standby takes over and reconciles")
}

// metricSum adds up the samples of a Prometheus text body whose series
// starts with prefix and holds every one of parts.
func metricSum(body, prefix string, parts ...string) float64 {
	var total float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); all && err == nil {
			total += v
		}
	}
	return total
}

// TestUnreachableAPIServer checks that a binary exits at once with a clear
// message when the API server cannot be reached.
func TestUnreachableAPIServer(t *testing.T) {
	port, err := cluster.FreePort()
	require.NoError(t, err)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: x, cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}}]
users: [{name: x, user: {token: x}}]
contexts: [{name: x, context: {cluster: x, user: x}}]
current-context: x
`, port)), 0o600))
	for _, name := range cluster.Controllers {
		out, err := exec.Command(filepath.Join(binDir, name), "--kubeconfig", kc, "--metrics-bind-address", "0", "--health-probe-bind-address", "0").CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s must fail", name)
		assert.Equal(t, 1, exit.ExitCode())
		assert.Contains(t, string(out), fmt.Sprintf("metallb-iad-%s: cannot reach the API server at https://127.0.0.1:%d", name, port))
	}
}

// TestMissingCRDs runs each binary against an API server without the
// address model's CRDs: it must exit at once, saying what is missing and how
// to install it.
func TestMissingCRDs(t *testing.T) {
	ctx := context.Background()
	bare, err := cluster.Start(ctx, cluster.Options{NoCRDs: true, NoMetalLB: true, NoControllerManager: true})
	require.NoError(t, err)
	defer bare.Stop()
	for _, name := range cluster.Controllers {
		out, err := exec.Command(filepath.Join(binDir, name), "--kubeconfig", bare.Kubeconfig,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0").CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s must fail", name)
		assert.Equal(t, 1, exit.ExitCode())
		assert.Equal(t, fmt.Sprintf("metallb-iad-%s: the API server does not serve local.sdn.cozystack.io/v1alpha1: "+
			"its CRDs are missing (install the address-controller chart, or this chart with installCRDs=true)\n", name), string(out))
	}
}

// TestPreflightNamesMissingCRDs checks the message a binary prints when the
// API it needs is not installed.
func TestPreflightNamesMissingCRDs(t *testing.T) {
	require.NoError(t, bootstrap.Preflight(c.Config, bootstrap.CoreAPI, bootstrap.MetalLBAPI))

	err := bootstrap.Preflight(c.Config, bootstrap.Requirement{
		GroupVersion: schema.GroupVersion{Group: "absent.example.org", Version: "v1"},
		Resources:    []string{"things"}, Hint: "install the things",
	})
	require.Error(t, err)
	assert.Equal(t, "the API server does not serve absent.example.org/v1: its CRDs are missing (install the things)", err.Error())

	missing := bootstrap.CoreAPI
	missing.Resources = append([]string{}, missing.Resources...)
	missing.Resources = append(missing.Resources, "ipaddressgadgets")
	err = bootstrap.Preflight(c.Config, missing)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not serve ipaddressgadgets.local.sdn.cozystack.io: its CRD is missing")
}

// TestSharingKeySecret checks the sharing-key Secret as the controllers
// meet it, each as its own ServiceAccount with the RBAC of config/rbac:
// started together on a cluster without it, they create exactly one and all
// read the same key; a Secret that exists is never replaced; without
// --sharing-key-create a missing Secret is an error that says what to do;
// and the binaries start with it.
func TestSharingKeySecret(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	key := client.ObjectKey{Namespace: cluster.DriverNamespace, Name: cluster.SharingKeySecret}
	drop := func() {
		s := &corev1.Secret{}
		s.Namespace, s.Name = key.Namespace, key.Name
		require.NoError(t, client.IgnoreNotFound(c.Client.Delete(context.Background(), s)))
	}
	drop()
	t.Cleanup(drop)

	users := map[string]client.Client{}
	for _, name := range []string{"claim", "service", "ipaddress"} {
		kc, err := c.ServiceAccountKubeconfig(cluster.DriverNamespace, "metallb-iad-"+name)
		require.NoError(t, err)
		cfg, err := clientcmd.BuildConfigFromFlags("", kc)
		require.NoError(t, err)
		users[name], err = client.New(cfg, client.Options{})
		require.NoError(t, err)
	}

	_, err := sharingkey.Ensure(ctx, users["claim"], key, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not exist: create it with a field \"key\"")

	var wg sync.WaitGroup
	got := map[string][]byte{}
	var mu sync.Mutex
	for name, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := sharingkey.Ensure(ctx, u, key, true)
			assert.NoError(t, err, name)
			mu.Lock()
			got[name] = b
			mu.Unlock()
		}()
	}
	wg.Wait()
	stored := &corev1.Secret{}
	require.NoError(t, c.Client.Get(ctx, key, stored))
	assert.GreaterOrEqual(t, len(stored.Data["key"]), 16)
	for name, b := range got {
		assert.Equal(t, stored.Data["key"], b, "%s reads the one stored key", name)
	}

	// A key that exists is read, never replaced, create or not.
	again, err := sharingkey.Ensure(ctx, users["service"], key, true)
	require.NoError(t, err)
	assert.Equal(t, stored.Data["key"], again)
	kept := &corev1.Secret{}
	require.NoError(t, c.Client.Get(ctx, key, kept))
	assert.Equal(t, stored.ResourceVersion, kept.ResourceVersion)

	// A key too short to be a secret is refused.
	kept.Data["key"] = []byte("short")
	require.NoError(t, c.Client.Update(ctx, kept))
	_, err = sharingkey.Ensure(ctx, users["ipaddress"], key, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "holds 5 bytes; it needs at least 16")
	drop()

	// The binaries, started as the chart starts them, create it themselves.
	for _, name := range []string{"claim", "service", "ipaddress"} {
		d, err := c.StartDriverReady(ctx, binDir, name)
		require.NoError(t, err, name)
		d.Stop(10 * time.Second)
	}
	require.NoError(t, c.Client.Get(ctx, key, stored))
	assert.GreaterOrEqual(t, len(stored.Data["key"]), 16)
}
