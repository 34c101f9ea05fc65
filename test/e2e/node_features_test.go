package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// Features only real Deployments can show: they run on the chart path
// (E2E_PROVIDER=kind or node). The pods' processes are read from this
// machine's /proc: on the node they run here, and on kind the node
// container shares this machine's kernel and process table, so those run
// on both too.

func needChart(t *testing.T) {
	t.Helper()
	if charted == nil {
		t.Skip("runs on real pods only: E2E_PROVIDER=kind or node (make test-node)")
	}
}

const podWait = 4 * time.Minute

func deploymentName(controller string) string { return "metallb-iad-" + controller }

func (k *kit) deployment(controller string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	require.NoError(k.t, k.k.Get(k.ctx, client.ObjectKey{Namespace: kindNamespace, Name: deploymentName(controller)}, d))
	return d
}

// pods lists the live (not terminating) pods of a controller.
func (k *kit) pods(t require.TestingT, controller string) []corev1.Pod {
	list := &corev1.PodList{}
	require.NoError(t, k.k.List(k.ctx, list, client.InNamespace(kindNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": controller, "app.kubernetes.io/instance": driverRelease}))
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// podState is what must not change on a controller nobody touched: each
// pod's UID and restart count.
func (k *kit) podState(controller string) map[string]int32 {
	out := map[string]int32{}
	for _, p := range k.pods(k.t, controller) {
		var restarts int32
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		out[string(p.UID)] = restarts
	}
	return out
}

// settled waits until a controller's Deployment has rolled out completely.
func (k *kit) settled(controller string) {
	require.EventuallyWithT(k.t, func(t *assert.CollectT) {
		d := &appsv1.Deployment{}
		require.NoError(t, k.k.Get(k.ctx, client.ObjectKey{Namespace: kindNamespace, Name: deploymentName(controller)}, d))
		assert.Equal(t, d.Generation, d.Status.ObservedGeneration)
		assert.Equal(t, *d.Spec.Replicas, d.Status.UpdatedReplicas)
		assert.Equal(t, *d.Spec.Replicas, d.Status.ReadyReplicas)
		assert.Equal(t, *d.Spec.Replicas, d.Status.Replicas, "no old pod left")
	}, podWait, 200*time.Millisecond, "Deployment %s rolled out", deploymentName(controller))
}

func kubectl(t *testing.T, args ...string) string {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", charted.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// TestChartTuning: `helm upgrade` with another replica count and other
// resources for one controller changes that Deployment only; the other
// three keep their pods.
func TestChartTuning(t *testing.T) {
	needChart(t)
	story(t, "chart tuning", "helm upgrade tunes the claim controller alone", "tuning", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		others := map[string]map[string]int32{}
		gens := map[string]int64{}
		for _, c := range cluster.Controllers {
			k.settled(c)
			if c != "claim" {
				others[c] = k.podState(c)
				gens[c] = k.deployment(c).Generation
			}
		}
		tuned := map[string]map[string]any{"claim": {
			"replicas": 3,
			"resources": map[string]any{
				"requests": map[string]any{"cpu": "20m", "memory": "80Mi"},
				"limits":   map[string]any{"memory": "300Mi"},
			},
		}}
		_, err := charted.UpgradeDriver(ctx, tuned)
		require.NoError(t, err)
		k.settled("claim")
		d := k.deployment("claim")
		assert.Equal(t, int32(3), *d.Spec.Replicas)
		res := d.Spec.Template.Spec.Containers[0].Resources
		assert.True(t, resource.MustParse("20m").Equal(res.Requests[corev1.ResourceCPU]), "cpu request %s", res.Requests.Cpu())
		assert.True(t, resource.MustParse("80Mi").Equal(res.Requests[corev1.ResourceMemory]))
		assert.True(t, resource.MustParse("300Mi").Equal(res.Limits[corev1.ResourceMemory]))
		assert.Len(t, k.pods(t, "claim"), 3)
		for c, before := range others {
			assert.Equal(t, gens[c], k.deployment(c).Generation, "the %s Deployment is unchanged", c)
			assert.Equal(t, before, k.podState(c), "the %s pods keep their UIDs and restart counts", c)
		}

		// The tuned controller serves: a claim goes Bound.
		k.class("e2e-tuning", iadv1alpha1.ReclaimDelete, "203.0.113.32/28")
		k.claim("ip", "e2e-tuning", iadv1alpha1.FamilyIPv4)
		k.bound("ip")

		_, err = charted.UpgradeDriver(ctx, nil)
		require.NoError(t, err)
		k.settled("claim")
		assert.Len(t, k.pods(t, "claim"), 2)
	})
}

// TestRolloutRestartMidHandoff: `kubectl rollout restart` of the service
// controller's Deployment while an attach is in flight. The new pods take
// over only once ready (readiness gates the rollout), the other three
// Deployments' pods keep their UIDs and restart counts, and the story
// completes with the same IP.
func TestRolloutRestartMidHandoff(t *testing.T) {
	needChart(t)
	story(t, "rollout restart", "roll the service controller during a handoff", "rollout", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.class("e2e-rollout", iadv1alpha1.ReclaimDelete, "203.0.113.48/28")
		a := k.heldClaim("ip", "e2e-rollout")
		k.settled("service")
		others := map[string]map[string]int32{}
		for _, c := range cluster.Controllers {
			if c != "service" {
				others[c] = k.podState(c)
			}
		}
		old := map[string]bool{}
		for _, p := range k.pods(t, "service") {
			old[string(p.UID)] = true
		}

		k.service("web", "ip") // the handoff starts...
		kubectl(t, "-n", kindNamespace, "rollout", "restart", "deployment/"+deploymentName("service"))

		// Watch the rollout: no old pod is told to stop before a new
		// one is Ready.
		var firstNewReady, firstOldStop time.Time
		deadline := time.Now().Add(podWait)
		for time.Now().Before(deadline) {
			list := &corev1.PodList{}
			require.NoError(t, k.k.List(ctx, list, client.InNamespace(kindNamespace), client.MatchingLabels{"app.kubernetes.io/component": "service"}))
			oldLeft := 0
			for _, p := range list.Items {
				if old[string(p.UID)] {
					oldLeft++
					if p.DeletionTimestamp != nil && firstOldStop.IsZero() {
						firstOldStop = p.DeletionTimestamp.Add(-time.Duration(*p.DeletionGracePeriodSeconds) * time.Second)
					}
					continue
				}
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && (firstNewReady.IsZero() || c.LastTransitionTime.Time.Before(firstNewReady)) {
						firstNewReady = c.LastTransitionTime.Time
					}
				}
			}
			if oldLeft == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		require.False(t, firstNewReady.IsZero(), "a new pod became Ready")
		require.False(t, firstOldStop.IsZero(), "an old pod was stopped")
		// Condition times have a one-second resolution.
		assert.False(t, firstOldStop.Before(firstNewReady.Add(-time.Second)),
			"the first old pod stopped at %s, before the first new pod was Ready at %s", firstOldStop, firstNewReady)
		kubectl(t, "-n", kindNamespace, "rollout", "status", "deployment/"+deploymentName("service"), "--timeout=4m")

		k.attached("web", a) // ...and completes
		for _, p := range k.pods(t, "service") {
			assert.False(t, old[string(p.UID)], "every service pod is new")
		}
		for c, before := range others {
			assert.Equal(t, before, k.podState(c), "the %s pods keep their UIDs and restart counts", c)
		}
		k.unannotate("web")
		k.held(a, iadv1alpha1.AddressBound)
		k.service("web2", "ip")
		k.attached("web2", a)
	})
}

// TestPodSecurity: every controller's container runs as 65532, not root,
// with a read-only root filesystem, no new privileges, and the runtime's
// default seccomp filter, as the kernel reports for the running process
// (on the node and on kind alike).
func TestPodSecurity(t *testing.T) {
	needChart(t)
	story(t, "pod security", "the running processes are confined", "security", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		for _, c := range cluster.Controllers {
			k.settled(c)
			pods := k.pods(t, c)
			require.NotEmpty(t, pods)
			for _, p := range pods {
				sc := p.Spec.Containers[0].SecurityContext
				require.NotNil(t, sc)
				assert.True(t, *sc.ReadOnlyRootFilesystem)
				assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)
				assert.NotNil(t, p.Spec.Containers[0].ReadinessProbe, "readiness gates the rollout")
			}
			var procs []int
			require.Eventually(t, func() bool {
				procs = processesOf(t, "/"+c)
				return len(procs) == len(pods)
			}, wait, tick, "one %s process per pod (%d pods)", c, len(pods))
			for _, pid := range procs {
				st := procStatus(t, pid)
				assert.Equal(t, "65532", strings.Fields(st["Uid"])[0], "%s runs as 65532", c)
				assert.Equal(t, "65532", strings.Fields(st["Gid"])[0])
				assert.Equal(t, "2", st["Seccomp"], "%s runs under a seccomp filter", c)
				assert.Equal(t, "1", st["NoNewPrivs"])
				assert.Equal(t, "0000000000000000", st["CapEff"], "%s has no capabilities", c)
				assert.True(t, rootReadOnly(t, pid), "%s's root filesystem is read-only", c)
			}
		}
	})
}

// processesOf lists the pids whose command is exe (as the container sees it).
func processesOf(t *testing.T, exe string) []int {
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		if strings.Split(string(b), "\x00")[0] == exe {
			out = append(out, pid)
		}
	}
	return out
}

func procStatus(t *testing.T, pid int) map[string]string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// rootReadOnly reads the process's own view of its mounts: "/" is ro.
func rootReadOnly(t *testing.T, pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 5 && f[4] == "/" {
			return strings.Contains(","+f[5]+",", ",ro,")
		}
	}
	return false
}

// TestMetricsService: each controller's metrics Service answers
// metallb_iad_* series through the Service address (kube-proxy's rules).
func TestMetricsService(t *testing.T) {
	needChart(t)
	story(t, "metrics Service", "every controller's metrics Service answers a token with the metrics-reader role, and only it", "metrics", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		// Give every controller something to count.
		k.class("e2e-metrics", iadv1alpha1.ReclaimDelete, "203.0.113.64/28")
		k.attachedClaim("ip", "e2e-metrics", "web")
		// The chart serves metrics over HTTPS to a token with its
		// metrics-reader role (metrics.secure, the default).
		s := newScrapers(ctx, t, cfg, k)
		for _, c := range cluster.Controllers {
			svc := &corev1.Service{}
			require.NoError(t, k.k.Get(ctx, client.ObjectKey{Namespace: kindNamespace, Name: deploymentName(c) + "-metrics"}, svc))
			url := fmt.Sprintf("https://%s:%d/metrics", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
			assertMetricsGuarded(ctx, t, url, s)
			// The Service spreads requests over the replicas; the leader's
			// answer carries the controller's own series.
			require.EventuallyWithT(t, func(ct *assert.CollectT) {
				code, body := scrape(ctx, ct, url, s.reader)
				assert.Equal(ct, http.StatusOK, code)
				assert.Contains(ct, body, "metallb_iad_"+metricOf(c))
			}, wait, tick, "%s answers metallb_iad_* through its Service", url)
		}
	})
}

func metricOf(controller string) string {
	switch controller {
	case "class":
		return "class_"
	case "claim":
		return "claim_"
	case "service":
		return "handoff"
	default:
		return "addresses"
	}
}

// TestUninstallReinstall: `helm uninstall` leaves no tenant object stuck
// on a driver finalizer and deletes no reservation: with the driver gone,
// every address is still Bound and held (or attached) with its IP, the
// CRDs, the placeholder namespace and the sharing key are still there. A
// reinstall picks up the existing addresses: every claim keeps its IP, the
// attached Service keeps it, and the story goes on with it.
func TestUninstallReinstall(t *testing.T) {
	needChart(t)
	story(t, "uninstall and reinstall", "the addresses survive the driver's absence", "reinstall", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		held, used := k.heldAndAttached("e2e-reinstall", "203.0.113.80/28")

		require.NoError(t, charted.UninstallDriver())
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			for _, ctl := range cluster.Controllers {
				assert.Empty(c, k.pods(c, ctl), "no %s pod left", ctl)
			}
		}, podWait, tick, "the driver's pods are gone")
		assertNothingStuck(t, k)
		// Nothing the chart rendered that holds a reservation went with it:
		// the CRDs (when ours installed them), the placeholder namespace and
		// every placeholder in it, and the sharing key the driver made.
		if charted.ourCRDs {
			for _, crd := range []string{"ipaddressclasses", "ipaddressclaims", "ipaddresses"} {
				kubectl(t, "get", "crd", crd+"."+iadv1alpha1.GroupVersion.Group)
			}
		}
		ns := &corev1.Namespace{}
		require.NoError(t, k.k.Get(ctx, client.ObjectKey{Name: holdsNamespace}, ns))
		assert.Nil(t, ns.DeletionTimestamp, "the placeholder namespace stays")
		key := &corev1.Secret{}
		require.NoError(t, k.k.Get(ctx, client.ObjectKey{Namespace: kindNamespace, Name: driverRelease + "-sharing-key"}, key))
		k.held(held, iadv1alpha1.AddressBound)
		k.attached("web", used)
		assert.Equal(t, []string{used.Address}, k.ingressOf("web"), "the attached Service keeps its IP without the driver")

		_, err := charted.InstallDriver(ctx, nil)
		require.NoError(t, err)
		k.storyGoesOn(held, used)
	})
}

// assertNothingStuck: no Service, claim or address is being deleted while
// a driver finalizer holds it.
func assertNothingStuck(t *testing.T, k *kit) {
	ctx := k.ctx
	driverFinalizer := func(m metav1.Object) bool {
		if m.GetDeletionTimestamp() == nil {
			return false
		}
		for _, f := range m.GetFinalizers() {
			if strings.HasPrefix(f, names.Domain) {
				return true
			}
		}
		return false
	}
	svcs := &corev1.ServiceList{}
	require.NoError(t, k.k.List(ctx, svcs))
	for i := range svcs.Items {
		assert.False(t, driverFinalizer(&svcs.Items[i]), "Service %s/%s is stuck on %v", svcs.Items[i].Namespace, svcs.Items[i].Name, svcs.Items[i].Finalizers)
	}
	claims := &iadv1alpha1.IPAddressClaimList{}
	require.NoError(t, k.k.List(ctx, claims))
	for i := range claims.Items {
		assert.False(t, driverFinalizer(&claims.Items[i]), "claim %s/%s is stuck", claims.Items[i].Namespace, claims.Items[i].Name)
	}
	addrs := &iadv1alpha1.IPAddressList{}
	require.NoError(t, k.k.List(ctx, addrs))
	for i := range addrs.Items {
		assert.False(t, driverFinalizer(&addrs.Items[i]), "IPAddress %s is stuck", addrs.Items[i].Name)
	}
}
