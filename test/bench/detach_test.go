package bench

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// BenchmarkDetachRelease compares, on the real MetalLB controller and with
// the driver's binaries doing the detach, the two ways a detach makes
// MetalLB take an address back from a Service that keeps existing:
//
//   - pin: the release pin (the driver pins the Service to an address no
//     pool has, waits until the ingress is empty, then removes the pin and
//     its marker). The driver uses it where the class pool does not require
//     the grant label (a pool edited by hand, until the class controller
//     renders it again), so this row's class pool is created without the
//     selector;
//   - grant: the driver withdraws the grant label and the pin in one patch
//     (the class pool's serviceSelectors no longer admit the Service),
//     waits until the ingress is empty, then removes the marker.
//
// The stack runs without the parking pool, so a Service that cannot share
// its address with the placeholder takes the gap handoff and one that can
// the shared handoff, and without the benchmarks' plain pool, so a Service
// MetalLB takes an address back from is left without one; the class
// controller is stopped, so the class pools stay as made by hand. For each mechanism and each handoff (gap, shared),
// n claims are provisioned and attached to n Services, and the tenant
// annotation is removed from all of them at once. Per detach it reports
// the latency from the annotation's removal until the Service lost the
// address, until a placeholder held it again (the address is free for its
// next holder, the hold; 0 when a placeholder held it throughout, as in the
// shared handoff), and until the Service carried nothing of the
// driver's; MetalLB's full passes over every Service, failed passes,
// "failed to handle service" lines, status update conflicts and
// AllocationFailed Events (MetalLB's info log and the Events); and the
// writes and 409 answers the API server counted from every client. Each
// iteration is one round of the four combinations; the figures add up the
// rounds of one run (go runs a benchmark once with one iteration, then with
// -benchtime's count: read the last table). Run it alone:
//
//	go test -v -run '^$' -bench BenchmarkDetachRelease -benchtime 3x ./test/bench/
//
// Measured with n = 8 and three rounds (then in controllers/service): both
// ways cost about one full pass and 33 to 36 API writes per detach; only
// the release pin made MetalLB fail, with 3.0 AllocationFailed Events per
// gap detach and 1.4 per shared one. That is why the driver detaches by
// withdrawing the grant and keeps the release pin for a pool without the
// selector (docs/design.md §5).
func BenchmarkDetachRelease(b *testing.B) {
	const n = 8
	e := setupParking(b, false)
	// The class controller would render both pools anew, with the selector.
	e.drivers["class"].Stop(10 * time.Second)
	// Without a pool that assigns automatically, MetalLB leaves a detached
	// Service without an address, as it takes it back.
	plain := &metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: plainPool}}
	require.NoError(b, e.k.Delete(e.ctx, plain))
	e.eventually(b, "pool "+plainPool+" gone", func() bool {
		return apierrors.IsNotFound(e.k.Get(e.ctx, client.ObjectKeyFromObject(plain), plain))
	})
	w := e.watchDetach(b)

	ranges := map[string]string{"pin": "203.0.113.64/27", "grant": "203.0.113.96/27"}
	for _, mech := range []string{"pin", "grant"} {
		e.detachClass(b, "bench-"+mech, ranges[mech], mech == "grant")
	}
	step("detach release: the classes")
	type key struct{ mech, mode string }
	acc := map[key]*detachResult{}
	var order []key
	for round := 0; round < b.N; round++ {
		for _, mode := range []string{handoffGap, handoffShared} {
			for _, mech := range []string{"pin", "grant"} {
				k := key{mech, mode}
				detachRounds++
				r := e.detachRound(b, w, "bench-"+mech, fmt.Sprintf("bench-%s-%s-%d", mech, mode, detachRounds), mode, n)
				require.Equal(b, n, r.byMech[mech], "every detach used the %s mechanism: %v", mech, r.byMech)
				if acc[k] == nil {
					acc[k] = &detachResult{}
					order = append(order, k)
				}
				acc[k].add(r)
				step(fmt.Sprintf("detach release: %s, %s handoff, %d Services at once", mech, mode, n))
			}
		}
	}
	var rows, kinds []string
	for _, k := range order {
		rows = append(rows, acc[k].row(k.mech, k.mode))
		kinds = append(kinds, fmt.Sprintf("- %s, %s: %s", k.mech, k.mode, PerOp(acc[k].reqs, acc[k].n)))
	}
	note(fmt.Sprintf("\nDetach of %d attached Services at once, %d round(s), without the parking pool; latencies p50 / max from the annotation's removal; counts per detach\n\n"+
		"| mechanism | handoff | Service lost the IP | a placeholder holds it again | driver done | MetalLB full passes | failed passes | \"failed to handle service\" | status update conflicts | AllocationFailed Events (for the release pin) | API writes | API 409s |\n"+
		"|---|---|---|---|---|---|---|---|---|---|---|---|\n%s\n\nAPI writes per detach, by kind (every client):\n%s\n",
		n, b.N, strings.Join(rows, "\n"), strings.Join(kinds, "\n")))
}

// The handoffs BenchmarkDetachRelease detaches from: a Service that cannot
// share its address with the placeholder (it serves the placeholder's
// port, 9/TCP), and one that can.
const (
	handoffGap    = "gap"
	handoffShared = "shared"
)

// detachRounds numbers the rounds of every run, so each round has a
// namespace of its own.
var detachRounds int

// detachClass creates a class with reclaim policy Delete and its pool, with
// the grant selector when grant is set, and waits until MetalLB has loaded
// the pool.
func (e *env) detachClass(b *testing.B, name, cidr string, grant bool) {
	b.Helper()
	require.NoError(b, client.IgnoreAlreadyExists(e.k.Create(e.ctx, &iadv1alpha1.IPAddressClass{
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
	require.NoError(b, client.IgnoreAlreadyExists(e.k.Create(e.ctx, pool)))
	e.eventually(b, "MetalLB loads pool "+pool.Name, func() bool {
		err := e.k.Get(e.ctx, client.ObjectKeyFromObject(pool), pool)
		return err == nil && pool.Status.AvailableIPv4 > 0
	})
}

// detachResult is what rounds of detaches measured, n detaches in all.
type detachResult struct {
	n                         int
	lost, held, done          []time.Duration
	log                       MetalLBLog
	allocFailed, releaseFails int
	reqs                      map[Request]float64 // writes by kind, leases left out
	writes, conflict          float64
	byMech                    map[string]int
}

func (r *detachResult) add(o detachResult) {
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
		r.reqs = map[Request]float64{}
	}
	for q, v := range o.reqs {
		r.reqs[q] += v
	}
}

func (r *detachResult) row(mech, mode string) string {
	per := func(v float64) string { return fmt.Sprintf("%.1f", v/float64(r.n)) }
	lat := func(ds []time.Duration) string {
		s := Summarize(ds)
		return fmt.Sprintf("%s / %s", s.P50.Round(time.Millisecond), s.Max.Round(time.Millisecond))
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s | %s |", mech, mode,
		lat(r.lost), lat(r.held), lat(r.done),
		per(float64(r.log.FullPasses)), per(float64(r.log.FailedPasses)), per(float64(r.log.HandleFailures)),
		per(float64(r.log.Conflicts)), per(float64(r.allocFailed)), per(float64(r.releaseFails)), per(r.writes), per(r.conflict))
}

// detachService is a Service asking for claim, shaped for the handoff mode.
func detachService(ns, name, claim, mode string) *corev1.Service {
	port := int32(80)
	if mode == handoffGap {
		port = 9
	}
	s := plainService(ns, name, port)
	s.Annotations[iadv1alpha1.ServiceClaimAnnotation] = claim
	return s
}

// placeholdersOf counts the placeholders of an address.
func (e *env) placeholdersOf(address string) (int, error) {
	var list corev1.ServiceList
	err := e.k.List(e.ctx, &list, client.InNamespace(cluster.DriverNamespace), client.MatchingLabels{marks.LabelAddress: address})
	return len(list.Items), err
}

// detachRound provisions n claims of class in namespace ns, attaches them
// to n Services shaped for the handoff mode, removes the tenant annotation
// from all of them and measures until each Service is detached and each
// address held again. It deletes the Services and claims at the end.
func (e *env) detachRound(b *testing.B, w *detachWatch, class, ns, mode string, n int) detachResult {
	b.Helper()
	ctx := e.ctx
	require.NoError(b, e.c.EnsureNamespace(ctx, ns))
	var claims []*iadv1alpha1.IPAddressClaim
	for i := 0; i < n; i++ {
		cl := &iadv1alpha1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("c%d", i)},
			Spec:       iadv1alpha1.IPAddressClaimSpec{ClassName: class, Family: iadv1alpha1.FamilyIPv4},
		}
		require.NoError(b, e.k.Create(ctx, cl))
		claims = append(claims, cl)
	}
	addrs := make([]*iadv1alpha1.IPAddress, n)
	e.eventually(b, "claims bound and held", func() bool {
		for i, cl := range claims {
			got := &iadv1alpha1.IPAddressClaim{}
			if e.k.Get(ctx, client.ObjectKeyFromObject(cl), got) != nil || got.Status.Phase != iadv1alpha1.ClaimBound || len(got.Status.Addresses) != 1 {
				return false
			}
			a := &iadv1alpha1.IPAddress{}
			if e.k.Get(ctx, client.ObjectKey{Name: got.Status.Addresses[0].Name}, a) != nil || !conditions.IsTrue(a.Status.Conditions, conditions.Held) {
				return false
			}
			addrs[i] = a
		}
		return true
	})
	var svcs []*corev1.Service
	for i := 0; i < n; i++ {
		s := detachService(ns, fmt.Sprintf("s%d", i), claims[i].Name, mode)
		require.NoError(b, e.k.Create(ctx, s))
		svcs = append(svcs, s)
	}
	e.eventually(b, "Services attached", func() bool {
		for i, s := range svcs {
			got := &corev1.Service{}
			if e.k.Get(ctx, client.ObjectKeyFromObject(s), got) != nil || strings.Join(ingressOf(got), ",") != addrs[i].Spec.Address {
				return false
			}
			a := &iadv1alpha1.IPAddress{}
			if e.k.Get(ctx, client.ObjectKeyFromObject(addrs[i]), a) != nil || a.Status.AssociatedTo == nil {
				return false
			}
			// A gap attachment has released its hold; a shared one keeps
			// it, sharing the address with the Service.
			phs, err := e.placeholdersOf(a.Name)
			if err != nil {
				return false
			}
			if mode == handoffShared {
				if !conditions.IsTrue(a.Status.Conditions, conditions.Held) || phs != 1 {
					return false
				}
			} else if !meta.IsStatusConditionFalse(a.Status.Conditions, conditions.Held) || phs > 0 {
				return false
			}
		}
		return true
	})
	e.settle(b)

	failed0, release0 := e.allocationFailed(b, ns)
	m0 := e.apiMetrics(b)
	off := FileSize(e.c.MetalLB().LogPath)
	starts := map[string]time.Time{}
	ips := map[string]string{}
	for i, s := range svcs {
		ips[s.Name] = addrs[i].Spec.Address
	}
	w.arm(ns, ips)
	for _, s := range svcs {
		starts[s.Name] = time.Now()
		got := &corev1.Service{}
		require.NoError(b, e.k.Get(ctx, client.ObjectKeyFromObject(s), got))
		orig := got.DeepCopy()
		delete(got.Annotations, iadv1alpha1.ServiceClaimAnnotation)
		require.NoError(b, e.k.Patch(ctx, got, client.MergeFrom(orig)))
	}
	for deadline := time.Now().Add(converge); !w.complete(len(svcs)); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("did not converge within %s: Services detached and addresses held again; %s", converge, w.missing())
		}
	}
	r := detachResult{n: n, byMech: map[string]int{}}
	r.lost, r.held, r.done = w.latencies(starts)
	e.settle(b)
	m1 := e.apiMetrics(b)

	r.log = CountMetalLBLog(ReadFrom(e.c.MetalLB().LogPath, off))
	reqs := APIRequests(m0, m1)
	r.writes = Writes(reqs, "leases")
	r.conflict = Total(APIRequestsWithCode(m0, m1, "409"), "leases")
	r.reqs = map[Request]float64{}
	for q, v := range reqs {
		if q.IsWrite() && q.Resource() != "leases" {
			r.reqs[q] = v
		}
	}
	failed1, release1 := e.allocationFailed(b, ns)
	r.allocFailed, r.releaseFails = failed1-failed0, release1-release0
	for _, m := range w.mechanisms() {
		r.byMech[m]++
	}

	for _, s := range svcs {
		require.NoError(b, client.IgnoreNotFound(e.k.Delete(ctx, s)))
	}
	for _, cl := range claims {
		require.NoError(b, client.IgnoreNotFound(e.k.Delete(ctx, cl)))
	}
	e.eventually(b, "addresses torn down", func() bool {
		for _, a := range addrs {
			if e.k.Get(ctx, client.ObjectKeyFromObject(a), &iadv1alpha1.IPAddress{}) == nil {
				return false
			}
		}
		return true
	})
	e.settle(b)
	return r
}

// allocationFailed counts MetalLB's AllocationFailed Events in ns so far,
// and those of them that failed a release pin (an Event repeated counts
// each time).
func (e *env) allocationFailed(b *testing.B, ns string) (all, release int) {
	b.Helper()
	var evs corev1.EventList
	require.NoError(b, e.k.List(e.ctx, &evs, client.InNamespace(ns)))
	for _, ev := range evs.Items {
		if ev.Reason == "AllocationFailed" {
			all += int(max(ev.Count, 1))
		}
		if releasePinFailure(ev) {
			release += int(max(ev.Count, 1))
		}
	}
	return all, release
}

// releasePinFailure reports whether an Event is MetalLB failing to satisfy
// a release pin (the unspecified address of either family).
func releasePinFailure(ev corev1.Event) bool {
	return ev.Reason == "AllocationFailed" && (strings.Contains(ev.Message, "0.0.0.0") || strings.Contains(ev.Message, `"::"`))
}

func ingressOf(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// detachWatch records, from an informer on every Service, when each
// Service of the armed namespace first showed an empty ingress and first
// carried neither the driver's pin nor its marker, and when a placeholder
// in the placeholder namespace first held each armed IP.
type detachWatch struct {
	store toolscache.Store

	mu               sync.Mutex
	ns               string
	ips              map[string]string // Service name -> IP
	lost, done, held map[string]time.Time
	// mech is how each Service was released, as its marks showed it:
	// "pin" (the release pin) or "grant" (the grant label withdrawn while
	// it held the address, the pin not a release pin).
	mech map[string]string
}

func (e *env) watchDetach(b *testing.B) *detachWatch {
	b.Helper()
	w := &detachWatch{}
	f := informers.NewSharedInformerFactory(e.cs, 0)
	inf := f.Core().V1().Services().Informer()
	w.store = inf.GetStore()
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

// arm starts watching the Services of ns and their IPs. An IP a
// placeholder holds already (beside its Service, in a shared attachment)
// is held from now on: the detach leaves it held throughout.
func (w *detachWatch) arm(ns string, ips map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ns, w.ips = ns, ips
	w.lost, w.done, w.held = map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	w.mech = map[string]string{}
	now := time.Now()
	for _, o := range w.store.List() {
		if s, ok := o.(*corev1.Service); ok && s.Namespace == cluster.DriverNamespace {
			w.holds(s, now)
		}
	}
}

// holds records the armed IPs the placeholder s shows, the first time at.
func (w *detachWatch) holds(s *corev1.Service, at time.Time) {
	for _, ip := range ingressOf(s) {
		if _, seen := w.held[ip]; !seen {
			for _, want := range w.ips {
				if ip == want {
					w.held[ip] = at
				}
			}
		}
	}
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
		if _, seen := w.lost[s.Name]; !seen && len(ingressOf(s)) == 0 {
			w.lost[s.Name] = now
		}
		if m := releaseMechanism(s); m != "" && w.mech[s.Name] == "" {
			w.mech[s.Name] = m
		}
		_, pin := s.Annotations[marks.KeyPin]
		_, marker := s.Annotations[marks.KeyPinnedBy]
		if _, seen := w.done[s.Name]; !seen && !pin && !marker && len(ingressOf(s)) == 0 {
			w.done[s.Name] = now
		}
		return
	}
	if s.Namespace == cluster.DriverNamespace {
		w.holds(s, now)
	}
}

func (w *detachWatch) complete(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.lost) == n && len(w.done) == n && len(w.held) == n
}

// mechanisms are the release mechanisms the armed Services showed.
func (w *detachWatch) mechanisms() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, m := range w.mech {
		out = append(out, m)
	}
	return out
}

// releaseMechanism is how a detached Service is being released, as one
// state of it shows: "pin" when it carries the release pin, "grant" when
// it still shows its address without the grant label and without a
// release pin; "" otherwise.
func releaseMechanism(s *corev1.Service) string {
	pin := s.Annotations[marks.KeyPin]
	_, granted := s.Labels[marks.LabelGrant]
	switch {
	case marks.IsReleasePin(pin):
		return "pin"
	case !granted && len(ingressOf(s)) > 0:
		return "grant"
	}
	return ""
}

// missing says which Services have not reached which moment yet.
func (w *detachWatch) missing() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for name, ip := range w.ips {
		var not []string
		if _, ok := w.lost[name]; !ok {
			not = append(not, "lost the IP")
		}
		if _, ok := w.held[ip]; !ok {
			not = append(not, "held again")
		}
		if _, ok := w.done[name]; !ok {
			not = append(not, "driver done")
		}
		if len(not) > 0 {
			out = append(out, fmt.Sprintf("%s (%s): not %s", name, ip, strings.Join(not, ", not ")))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// latencies is, per Service, the time from its detach to each of the three
// moments; an IP held throughout counts 0.
func (w *detachWatch) latencies(starts map[string]time.Time) (lost, held, done []time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, t0 := range starts {
		lost = append(lost, w.lost[name].Sub(t0))
		held = append(held, max(w.held[w.ips[name]].Sub(t0), 0))
		done = append(done, w.done[name].Sub(t0))
	}
	w.ips = nil
	return lost, held, done
}
