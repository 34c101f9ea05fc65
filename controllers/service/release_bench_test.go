package service

import (
	"context"
	"fmt"
	"github.com/cozystack/metallb-iad/internal/binding"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// BenchmarkDetachRelease compares, on the real MetalLB controller, the two
// ways a detach can make MetalLB take addresses back from Services that
// keep existing, n Services at a time, each pinned to its own address of a
// pool that admits only granted Services:
//
//   - pin: replace the pin with an unsatisfiable release pin, wait until
//     the ingress is empty, then remove the pin (the driver's marker with it);
//   - grant: withdraw the grant label and the pin in one patch, wait until
//     the ingress is empty, then remove the marker.
//
// It prints, per mechanism, MetalLB's full passes over every Service
// (reprocessAll in its log), its AllocationFailed Events on the Services
// and its "failed to handle service" error lines, and the time until every
// ingress was empty. Run it alone:
//
//	METALLB_IAD_METALLB_LOG_LEVEL=info go test ./controllers/service -run '^$' -bench BenchmarkDetachRelease -benchtime 1x
func BenchmarkDetachRelease(b *testing.B) {
	ctx := context.Background()
	const n = 10
	if c.MetalLBLogLevel != "info" {
		b.Skip("counting MetalLB's full passes needs its info log: set METALLB_IAD_METALLB_LOG_LEVEL=info")
	}
	const cls = "bench-release"
	pool := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: names.PoolName(cls)},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.64/27"}, AutoAssign: ptr.To(false)},
	}
	pool.Spec.AllocateTo = &metallbv1beta1.ServiceAllocation{ServiceSelectors: []metav1.LabelSelector{names.GrantSelector(cls)}}
	require.NoError(b, client.IgnoreAlreadyExists(c.Client.Create(ctx, pool)))

	var rows []string
	for round := 0; round < b.N; round++ {
		for _, mech := range []string{"pin", "grant"} {
			ns := fmt.Sprintf("bench-release-%s-%d", mech, round)
			require.NoError(b, c.EnsureNamespace(ctx, ns))
			var svcs []*corev1.Service
			for i := 0; i < n; i++ {
				s := sharedLB(ns, fmt.Sprintf("s%d", i), "")
				s.Labels = map[string]string{names.LabelGrant: cls}
				s.Annotations[names.MetalLBLoadBalancerIPs] = fmt.Sprintf("192.0.2.%d", 65+i)
				s.Annotations[names.AnnotationPinnedBy] = "bench"
				require.NoError(b, c.Client.Create(ctx, s))
				svcs = append(svcs, s)
			}
			waitIngress(b, svcs, true)
			settle(b)
			passes0, errs0 := metallbLog(b)

			t0 := time.Now()
			for _, s := range svcs {
				patchSvc(b, s, func(s *corev1.Service) {
					if mech == "pin" {
						s.Annotations[names.MetalLBLoadBalancerIPs] = binding.ReleasePinValue(s)
					} else {
						delete(s.Annotations, names.MetalLBLoadBalancerIPs)
						delete(s.Labels, names.LabelGrant)
					}
				})
			}
			waitIngress(b, svcs, false)
			took := time.Since(t0)
			for _, s := range svcs {
				patchSvc(b, s, func(s *corev1.Service) {
					delete(s.Annotations, names.MetalLBLoadBalancerIPs)
					delete(s.Annotations, names.AnnotationPinnedBy)
				})
			}
			settle(b)
			passes1, errs1 := metallbLog(b)
			failed, impossible := 0, 0
			var evs corev1.EventList
			require.NoError(b, c.Client.List(ctx, &evs, client.InNamespace(ns)))
			for _, e := range evs.Items {
				if e.Reason == "AllocationFailed" {
					failed += int(max(e.Count, 1))
				}
				if releasePinFailure(e) {
					impossible += int(max(e.Count, 1))
				}
			}
			rows = append(rows, fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %s |", mech, n, passes1-passes0, failed, impossible, errs1-errs0, took.Round(time.Millisecond)))
			for _, s := range svcs {
				require.NoError(b, c.Client.Delete(ctx, s))
			}
		}
	}
	fmt.Printf("\n| mechanism | Services | full passes | AllocationFailed | of them for the release pin | \"failed to handle service\" lines | until every ingress was empty |\n|---|---|---|---|---|---|---|\n%s\n", strings.Join(rows, "\n"))
}

// metallbLog counts, in MetalLB's log so far, the full passes it started
// and the Services it failed to handle.
func metallbLog(b *testing.B) (passes, errs int) {
	raw, err := os.ReadFile(c.MetalLB().LogPath)
	require.NoError(b, err)
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(l, "reprocessAll") && strings.Contains(l, "start reconcile") {
			passes++
		}
		if strings.Contains(l, "failed to handle service") {
			errs++
		}
	}
	return passes, errs
}

// settle waits until MetalLB's log has not grown for two seconds, so the
// passes a step caused are all counted.
func settle(b *testing.B) {
	last, still := int64(-1), time.Now()
	for time.Since(still) < 2*time.Second {
		fi, err := os.Stat(c.MetalLB().LogPath)
		require.NoError(b, err)
		if fi.Size() != last {
			last, still = fi.Size(), time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitIngress(b *testing.B, svcs []*corev1.Service, held bool) {
	deadline := time.Now().Add(2 * time.Minute)
	for _, s := range svcs {
		for {
			got := getSvc(b, s.Namespace, s.Name)
			if (len(ingress(got)) > 0) == held {
				break
			}
			require.True(b, time.Now().Before(deadline), "%s/%s: held=%v not reached", s.Namespace, s.Name, held)
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func patchSvc(b *testing.B, s *corev1.Service, change func(*corev1.Service)) {
	got := getSvc(b, s.Namespace, s.Name)
	orig := got.DeepCopy()
	change(got)
	require.NoError(b, c.Client.Patch(context.Background(), got, client.MergeFrom(orig)))
}
