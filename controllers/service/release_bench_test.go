//go:build integration

package service

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/bench"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// BenchmarkDetachRelease compares, on the real MetalLB controller and with
// the driver's own code doing the detach, the two ways a detach makes
// MetalLB take an address back from a Service that keeps existing:
//
//   - pin: the release pin (the driver pins the Service to an address no
//     pool has, waits until the ingress is empty, then removes the pin and
//     its marker). The driver uses it where the class pool does not require
//     the grant label yet (a pool an older version rendered), so this row's
//     class pool is created without the selector;
//   - grant: the driver withdraws the grant label and the pin in one patch
//     (the class pool's serviceSelectors no longer admit the Service),
//     waits until the ingress is empty, then removes the marker.
//
// The service controller of this suite, the claim controller, the
// IPAddress controller and the reference core run as in the end-to-end
// tests; the class pools are made by hand. For each mechanism and each
// handoff (gap: a Service that cannot share with the placeholder; shared:
// one that can), n claims are provisioned and attached to n Services, and
// the tenant annotation is removed from all of them at once. Per detach it
// prints the latency from the annotation's removal until the Service lost
// the address, until a placeholder held it again (the address is free for
// its next holder, the hold), and until the Service carried nothing of the
// driver's; MetalLB's full passes over every Service, failed passes,
// "failed to handle service" lines, status update conflicts and
// AllocationFailed Events (MetalLB's info log and the Events); and the
// writes and 409 answers the API server counted from every client. Each
// iteration is one round of the four combinations; the figures add up the
// rounds of one run (go runs a benchmark once with one iteration, then with
// -benchtime's count: read the last table). Run it alone:
//
//	METALLB_IAD_METALLB_LOG_LEVEL=info go test ./controllers/service -run '^$' -bench BenchmarkDetachRelease -benchtime 3x
func BenchmarkDetachRelease(b *testing.B) {
	if c.MetalLBLogLevel != "info" {
		b.Skip("counting MetalLB's full passes needs its info log: set METALLB_IAD_METALLB_LOG_LEVEL=info")
	}
	const n = 8
	ctx := context.Background()
	startDriver(b)
	cs, err := kubernetes.NewForConfig(c.Config)
	require.NoError(b, err)
	w := watchDetach(b, cs)

	ranges := map[string]string{"pin": "203.0.113.64/27", "grant": "203.0.113.96/27"}
	for _, mech := range []string{"pin", "grant"} {
		benchClass(b, "bench-"+mech, ranges[mech], mech == "grant")
	}
	type key struct{ mech, mode string }
	acc := map[key]*roundResult{}
	var order []key
	for round := 0; round < b.N; round++ {
		for _, mode := range []string{ModeGap, ModeShared} {
			for _, mech := range []string{"pin", "grant"} {
				k := key{mech, mode}
				benchRounds++
				r := detachRound(ctx, b, cs, w, "bench-"+mech, fmt.Sprintf("bench-%s-%s-%d", mech, mode, benchRounds), mode, n)
				require.Equal(b, n, r.byMech[mech], "every detach used the %s mechanism: %v", mech, r.byMech)
				if acc[k] == nil {
					acc[k] = &roundResult{}
					order = append(order, k)
				}
				acc[k].add(r)
			}
		}
	}
	var rows, kinds []string
	for _, k := range order {
		rows = append(rows, acc[k].row(k.mech, k.mode))
		kinds = append(kinds, fmt.Sprintf("- %s, %s: %s", k.mech, k.mode, bench.PerOp(acc[k].reqs, acc[k].n)))
	}
	fmt.Printf("\nDetach of %d attached Services at once, %d round(s); latencies p50 / max from the annotation's removal; counts per detach\n\n"+
		"| mechanism | handoff | Service lost the IP | a placeholder holds it again | driver done | MetalLB full passes | failed passes | \"failed to handle service\" | status update conflicts | AllocationFailed Events (for the release pin) | API writes | API 409s |\n"+
		"|---|---|---|---|---|---|---|---|---|---|---|---|\n%s\n\nAPI writes per detach, by kind (every client):\n%s\n",
		n, b.N, strings.Join(rows, "\n"), strings.Join(kinds, "\n"))
}

// benchRounds numbers the rounds of every run, so each round has a
// namespace of its own.
var benchRounds int

// benchClass creates a class with reclaim policy Delete and its pool, with
// the grant selector when grant is set.
func benchClass(b *testing.B, name, cidr string, grant bool) {
	ctx := context.Background()
	require.NoError(b, client.IgnoreAlreadyExists(c.Client.Create(ctx, &iadv1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       iadv1alpha1.IPAddressClassSpec{Provisioner: names.Provisioner, ReclaimPolicy: iadv1alpha1.ReclaimDelete},
	})))
	pool := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: names.PoolName(name)},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{cidr}, AutoAssign: ptr.To(false)},
	}
	if grant {
		pool.Spec.AllocateTo = &metallbv1beta1.ServiceAllocation{ServiceSelectors: []metav1.LabelSelector{marks.GrantSelector(name)}}
	}
	require.NoError(b, client.IgnoreAlreadyExists(c.Client.Create(ctx, pool)))
}

// roundResult is what rounds of detaches measured, n detaches in all.
type roundResult struct {
	n                         int
	lost, held, done          []time.Duration
	log                       bench.MetalLBLog
	allocFailed, releaseFails int
	reqs                      map[bench.Request]float64 // writes by kind, leases left out
	writes, conflict          float64
	byMech                    map[string]int
}

func (r *roundResult) add(o roundResult) {
	r.n += o.n
	r.lost, r.held, r.done = append(r.lost, o.lost...), append(r.held, o.held...), append(r.done, o.done...)
	r.log.FullPasses += o.log.FullPasses
	r.log.FailedPasses += o.log.FailedPasses
	r.log.HandleFailures += o.log.HandleFailures
	r.log.Conflicts += o.log.Conflicts
	r.allocFailed += o.allocFailed
	r.releaseFails += o.releaseFails
	r.writes += o.writes
	r.conflict += o.conflict
	if r.reqs == nil {
		r.reqs = map[bench.Request]float64{}
	}
	for q, v := range o.reqs {
		r.reqs[q] += v
	}
}

func (r *roundResult) row(mech, mode string) string {
	per := func(v float64) string { return fmt.Sprintf("%.1f", v/float64(r.n)) }
	lat := func(ds []time.Duration) string {
		s := bench.Summarize(ds)
		return fmt.Sprintf("%s / %s", s.P50.Round(time.Millisecond), s.Max.Round(time.Millisecond))
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s | %s |", mech, mode,
		lat(r.lost), lat(r.held), lat(r.done),
		per(float64(r.log.FullPasses)), per(float64(r.log.FailedPasses)), per(float64(r.log.HandleFailures)),
		per(float64(r.log.Conflicts)), per(float64(r.allocFailed)), per(float64(r.releaseFails)), per(r.writes), per(r.conflict))
}

// detachRound provisions n claims of class in namespace ns, attaches them
// to n Services shaped for the handoff mode, removes the tenant annotation
// from all of them and measures until each Service is detached and each
// address held again. It deletes the Services and claims at the end.
func detachRound(ctx context.Context, b *testing.B, cs kubernetes.Interface, w *detachWatch, class, ns, mode string, n int) roundResult {
	require.NoError(b, c.EnsureNamespace(ctx, ns))
	var claims []*iadv1alpha1.IPAddressClaim
	for i := 0; i < n; i++ {
		claims = append(claims, createClaim(b, ns, fmt.Sprintf("c%d", i), class, iadv1alpha1.FamilyIPv4))
	}
	addrs := make([]*iadv1alpha1.IPAddress, n)
	eventually(b, "claims bound and held", func() bool {
		for i, cl := range claims {
			got := &iadv1alpha1.IPAddressClaim{}
			if c.Client.Get(ctx, client.ObjectKeyFromObject(cl), got) != nil || got.Status.Phase != iadv1alpha1.ClaimBound || len(got.Status.Addresses) != 1 {
				return false
			}
			a := &iadv1alpha1.IPAddress{}
			if c.Client.Get(ctx, client.ObjectKey{Name: got.Status.Addresses[0].Name}, a) != nil || !conditions.IsTrue(a.Status.Conditions, conditions.Held) {
				return false
			}
			addrs[i] = a
		}
		return true
	})
	var svcs []*corev1.Service
	for i := 0; i < n; i++ {
		s := lb(ns, fmt.Sprintf("s%d", i), claims[i].Name)
		if mode == ModeShared {
			s = sharedLB(ns, fmt.Sprintf("s%d", i), claims[i].Name)
		}
		require.NoError(b, c.Client.Create(ctx, s))
		svcs = append(svcs, s)
	}
	eventually(b, "Services attached", func() bool {
		for i, s := range svcs {
			got := &corev1.Service{}
			if c.Client.Get(ctx, client.ObjectKeyFromObject(s), got) != nil || strings.Join(fixture.Ingress(got), ",") != addrs[i].Spec.Address {
				return false
			}
			a := &iadv1alpha1.IPAddress{}
			if c.Client.Get(ctx, client.ObjectKeyFromObject(addrs[i]), a) != nil || a.Status.AssociatedTo == nil {
				return false
			}
			// A gap attachment has released its hold; a shared one keeps
			// it, sharing the address with the Service.
			if mode == ModeShared {
				if !conditions.IsTrue(a.Status.Conditions, conditions.Held) || len(suite.PlaceholdersOf(b, a.Name)) != 1 {
					return false
				}
			} else if !conditions.IsFalse(a.Status.Conditions, conditions.Held) || len(suite.PlaceholdersOf(b, a.Name)) > 0 {
				return false
			}
		}
		return true
	})
	settle(b)

	failed0, release0 := allocationFailed(b, ns)
	m0 := apiMetrics(b, cs)
	off := bench.FileSize(c.MetalLB().LogPath)
	starts := map[string]time.Time{}
	ips := map[string]string{}
	for i, s := range svcs {
		ips[s.Name] = addrs[i].Spec.Address
	}
	w.arm(ns, ips)
	for _, s := range svcs {
		starts[s.Name] = time.Now()
		got := suite.GetService(b, ns, s.Name)
		orig := got.DeepCopy()
		delete(got.Annotations, iadv1alpha1.ServiceClaimAnnotation)
		require.NoError(b, c.Client.Patch(ctx, got, client.MergeFrom(orig)))
	}
	eventually(b, "Services detached and addresses held again", func() bool { return w.complete(len(svcs)) })
	r := roundResult{n: n, byMech: map[string]int{}}
	r.lost, r.held, r.done = w.latencies(starts)
	settle(b)
	m1 := apiMetrics(b, cs)

	r.log = bench.CountMetalLBLog(bench.ReadFrom(c.MetalLB().LogPath, off))
	reqs := bench.APIRequests(m0, m1)
	r.writes = bench.Writes(reqs, "leases")
	r.conflict = bench.Total(bench.APIRequestsWithCode(m0, m1, "409"), "leases")
	r.reqs = map[bench.Request]float64{}
	for q, v := range reqs {
		if q.IsWrite() && q.Resource() != "leases" {
			r.reqs[q] = v
		}
	}
	failed1, release1 := allocationFailed(b, ns)
	r.allocFailed, r.releaseFails = failed1-failed0, release1-release0
	var evs corev1.EventList
	require.NoError(b, c.Client.List(ctx, &evs, client.InNamespace(ns)))
	for _, e := range evs.Items {
		switch {
		case e.Reason == ReasonReleasing && strings.Contains(e.Message, marks.LabelGrant):
			r.byMech["grant"]++
		case e.Reason == ReasonReleasing && strings.Contains(e.Message, "cannot satisfy"):
			r.byMech["pin"]++
		}
	}

	for _, s := range svcs {
		require.NoError(b, client.IgnoreNotFound(c.Client.Delete(ctx, s)))
	}
	for _, cl := range claims {
		require.NoError(b, client.IgnoreNotFound(c.Client.Delete(ctx, cl)))
	}
	eventually(b, "addresses torn down", func() bool {
		for _, a := range addrs {
			if c.Client.Get(ctx, client.ObjectKeyFromObject(a), &iadv1alpha1.IPAddress{}) == nil {
				return false
			}
		}
		return true
	})
	settle(b)
	return r
}

// allocationFailed counts MetalLB's AllocationFailed Events in ns so far,
// and those of them that failed a release pin (an Event repeated counts
// each time).
func allocationFailed(b *testing.B, ns string) (all, release int) {
	var evs corev1.EventList
	require.NoError(b, c.Client.List(context.Background(), &evs, client.InNamespace(ns)))
	for _, e := range evs.Items {
		if e.Reason == "AllocationFailed" {
			all += int(max(e.Count, 1))
		}
		if releasePinFailure(e) {
			release += int(max(e.Count, 1))
		}
	}
	return all, release
}

// detachWatch records, from an informer on every Service, when each
// Service of the armed namespace first showed an empty ingress and first
// carried neither the driver's pin nor its marker, and when a placeholder
// in the placeholder namespace first held each armed IP.
type detachWatch struct {
	mu               sync.Mutex
	ns               string
	ips              map[string]string // Service name -> IP
	lost, done, held map[string]time.Time
}

func watchDetach(b *testing.B, cs kubernetes.Interface) *detachWatch {
	w := &detachWatch{}
	f := informers.NewSharedInformerFactory(cs, 0)
	inf := f.Core().V1().Services().Informer()
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.see(o) },
		UpdateFunc: func(_, o any) { w.see(o) },
	})
	require.NoError(b, err)
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop) })
	f.Start(stop)
	f.WaitForCacheSync(stop)
	return w
}

func (w *detachWatch) arm(ns string, ips map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ns, w.ips = ns, ips
	w.lost, w.done, w.held = map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
}

func (w *detachWatch) see(o any) {
	s, ok := o.(*corev1.Service)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ips == nil {
		return
	}
	if s.Namespace == w.ns {
		if _, ok := w.ips[s.Name]; !ok {
			return
		}
		if _, seen := w.lost[s.Name]; !seen && len(fixture.Ingress(s)) == 0 {
			w.lost[s.Name] = now
		}
		_, pin := s.Annotations[marks.KeyPin]
		_, marker := s.Annotations[marks.KeyPinnedBy]
		if _, seen := w.done[s.Name]; !seen && !pin && !marker && len(fixture.Ingress(s)) == 0 {
			w.done[s.Name] = now
		}
		return
	}
	if s.Namespace != placeholderNS {
		return
	}
	for _, ip := range fixture.Ingress(s) {
		if _, seen := w.held[ip]; !seen {
			for _, want := range w.ips {
				if ip == want {
					w.held[ip] = now
				}
			}
		}
	}
}

func (w *detachWatch) complete(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.lost) == n && len(w.done) == n && len(w.held) == n
}

// latencies is, per Service, the time from its detach to each of the three
// moments.
func (w *detachWatch) latencies(starts map[string]time.Time) (lost, held, done []time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, t0 := range starts {
		lost = append(lost, w.lost[name].Sub(t0))
		held = append(held, w.held[w.ips[name]].Sub(t0))
		done = append(done, w.done[name].Sub(t0))
	}
	w.ips = nil
	return lost, held, done
}

// eventually waits for cond, failing the benchmark after three minutes:
// a benchmark fails only when the system does not converge.
func eventually(b *testing.B, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		require.True(b, time.Now().Before(deadline), "%s: not reached in 3m", what)
		time.Sleep(50 * time.Millisecond)
	}
}

func apiMetrics(b *testing.B, cs kubernetes.Interface) bench.Metrics {
	m, err := bench.ScrapeAPIServer(context.Background(), cs)
	require.NoError(b, err, "scrape the API server's metrics")
	return m
}

// settle waits until MetalLB's log has not grown for two seconds, so the
// passes a step caused are all counted in it.
func settle(b *testing.B) {
	last, still := int64(-1), time.Now()
	for time.Since(still) < 2*time.Second {
		if sz := bench.FileSize(c.MetalLB().LogPath); sz != last {
			last, still = sz, time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
}
