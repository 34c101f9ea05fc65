package bench

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim"
	"github.com/cozystack/metallb-iad/controllers/class"
	"github.com/cozystack/metallb-iad/controllers/ipaddress"
	"github.com/cozystack/metallb-iad/controllers/service"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/compact"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/servicecache"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// The kinds a claim or a Service puts in the controllers' caches, by the
// names the memory tables use.
const (
	kindClaim       = "IPAddressClaim"
	kindAddress     = "IPAddress"
	kindPlaceholder = "placeholder Service"
	kindService     = "Service"
)

// cachedPerClaim is what each controller caches for one claim: its
// IPAddress everywhere, the claim where it is watched, and its
// placeholder where Services are (the claim controller's cache holds only
// placeholders). The controllers' watches in controllers/*/ say so.
var cachedPerClaim = map[string][]string{
	"class":     {kindAddress},
	"claim":     {kindClaim, kindAddress, kindPlaceholder},
	"service":   {kindClaim, kindAddress, kindPlaceholder},
	"ipaddress": {kindAddress, kindPlaceholder},
}

// cachesServices are the controllers that cache every Service of the
// cluster; the others cache none but placeholders.
var cachesServices = map[string]bool{"service": true, "ipaddress": true}

// cacheOf is each controller's cache options, as its binary builds them.
var cacheOf = map[string]func(*bootstrap.Options) map[client.Object]cache.ByObject{
	"class": class.Controller.Cache, "claim": claim.Controller.Cache,
	"service": service.Controller.Cache, "ipaddress": ipaddress.Controller.Cache,
}

// transformOf is what controller ctl's cache does to an object of obj's
// kind: the transform its cache options give the kind, or the default
// every cache applies (bootstrap.NewManager).
func transformOf(ctl string, obj client.Object) toolscache.TransformFunc {
	if opts := cacheOf[ctl]; opts != nil {
		for o, by := range opts(&bootstrap.Options{}) {
			if reflect.TypeOf(o) == reflect.TypeOf(obj) && by.Transform != nil {
				return by.Transform
			}
		}
	}
	return compact.Object
}

// memAt is each controller's memory with the claims of each N in place;
// memAtServices the same with each number of Services in the cluster
// (the handoff's background sizes); objectBytes what one cached object of
// each kind takes in each controller's cache (measureObjects), by
// controller and kind. All under resultsMu.
var (
	memAt         = map[int]map[string]memSample{}
	memAtServices = map[int]map[string]memSample{}
	objectBytes   = map[string]map[string]float64{}
)

// heapOfObjects lists the objects of a kind from the API server, turns
// them into what a controller's cache keeps (typed, through its cache's
// transform for the kind), and returns the live heap they take per object
// in this process, the median of three readings, with how many there were.
func heapOfObjects(ctx context.Context, c client.Client, transform toolscache.TransformFunc, list client.ObjectList, opts ...client.ListOption) (float64, int, error) {
	var readings []float64
	n := 0
	for range 3 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l := list.DeepCopyObject().(client.ObjectList)
		if err := c.List(ctx, l, opts...); err != nil {
			return 0, 0, err
		}
		var kept []any
		var err error
		switch v := l.(type) {
		case *iadv1alpha1.IPAddressClaimList:
			for i := range v.Items {
				kept = append(kept, v.Items[i].DeepCopy())
			}
		case *iadv1alpha1.IPAddressList:
			for i := range v.Items {
				kept = append(kept, v.Items[i].DeepCopy())
			}
		case *corev1.ServiceList:
			for i := range v.Items {
				kept = append(kept, v.Items[i].DeepCopy())
			}
		default:
			return 0, 0, fmt.Errorf("no cache form for %T", l)
		}
		l = nil
		for i := range kept {
			if kept[i], err = transform(kept[i]); err != nil {
				return 0, 0, err
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		n = len(kept)
		if n == 0 {
			return 0, 0, nil
		}
		readings = append(readings, (float64(after.HeapAlloc)-float64(before.HeapAlloc))/float64(n))
		runtime.KeepAlive(kept)
	}
	slices.Sort(readings)
	return readings[1], n, nil
}

// measureObjects measures what one object of each kind a claim puts in
// each controller's cache takes there (heapOfObjects), on the objects in
// the cluster; a transform two controllers share is measured once.
func (e *env) measureObjects(b *testing.B) {
	b.Helper()
	seen := map[string]float64{}
	for _, ctl := range cluster.Controllers {
		for _, kind := range cachedPerClaim[ctl] {
			e.measure(b, seen, ctl, kind)
		}
	}
}

// kinds are the kinds the memory tables name: an object and a list of
// each, and how the benchmark lists them.
var kinds = map[string]struct {
	item client.Object
	list client.ObjectList
	opts []client.ListOption
}{
	kindClaim:       {item: &iadv1alpha1.IPAddressClaim{}, list: &iadv1alpha1.IPAddressClaimList{}},
	kindAddress:     {item: &iadv1alpha1.IPAddress{}, list: &iadv1alpha1.IPAddressList{}},
	kindPlaceholder: {item: &corev1.Service{}, list: &corev1.ServiceList{}, opts: []client.ListOption{client.InNamespace(cluster.DriverNamespace), client.HasLabels{marks.LabelPlaceholder}}},
	kindService:     {item: &corev1.Service{}, list: &corev1.ServiceList{}},
}

// measure records in objectBytes what one object of kind, listed as kinds
// says and with opts, takes in controller ctl's cache, reusing the reading
// in seen of the same kind through the same transform.
func (e *env) measure(b *testing.B, seen map[string]float64, ctl, kind string, opts ...client.ListOption) {
	b.Helper()
	k := kinds[kind]
	transform := transformOf(ctl, k.item)
	key := fmt.Sprintf("%s %x", kind, reflect.ValueOf(transform).Pointer())
	per, ok := seen[key]
	if !ok {
		var n int
		var err error
		per, n, err = heapOfObjects(e.ctx, e.k, transform, k.list, append(slices.Clone(k.opts), opts...)...)
		require.NoError(b, err, "measure cached %s", kind)
		if n == 0 {
			return
		}
		seen[key] = per
	}
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if objectBytes[ctl] == nil {
		objectBytes[ctl] = map[string]float64{}
	}
	objectBytes[ctl][kind] = per
}

// measureServices measures what one cached plain Service takes in the
// controllers that cache every Service, on the background Services of
// namespace ns.
func (e *env) measureServices(b *testing.B, ns string) {
	b.Helper()
	seen := map[string]float64{}
	for _, ctl := range servicesCachers() {
		e.measure(b, seen, ctl, kindService, client.InNamespace(ns))
	}
}

// span is the smallest and the largest scale memory was measured at, and
// whether they are two.
func span(at map[int]map[string]memSample) (lo, hi int, ok bool) {
	ns := slices.Sorted(maps.Keys(at))
	if len(ns) < 2 {
		return 0, 0, false
	}
	return ns[0], ns[len(ns)-1], true
}

// slope is the growth of y per unit of x between two points.
func slope(x0, y0, x1, y1 float64) float64 { return Ratio(y1-y0, x1-x0) }

// memorySlopes is the note on memory per claim between the two smallest
// N of memAt and the largest: each controller's live heap and RSS at
// both, their growth per claim, and what the objects it caches for a
// claim take (objectBytes), the rest being its indexes, queues and
// bookkeeping. "" until two N are measured.
func memorySlopes(at map[int]map[string]memSample, objs map[string]map[string]float64) string {
	lo, hi, ok := span(at)
	if !ok {
		return ""
	}
	rows := [][]string{{"CONTROLLER", fmt.Sprintf("LIVE HEAP N=%d", lo), fmt.Sprintf("N=%d", hi), "PER CLAIM", "RSS PER CLAIM", "CACHED OBJECTS PER CLAIM"}}
	for _, ctl := range cluster.Controllers {
		a, z := at[lo][ctl], at[hi][ctl]
		var parts []string
		sum := 0.0
		for _, k := range cachedPerClaim[ctl] {
			if v, ok := objs[ctl][k]; ok {
				sum += v
				parts = append(parts, fmt.Sprintf("%s %s", k, kib(v)))
			}
		}
		cached := "-"
		if len(parts) > 0 {
			cached = fmt.Sprintf("%s (%s)", kib(sum), strings.Join(parts, " + "))
		}
		rows = append(rows, []string{ctl, MiB(a.live), MiB(z.live),
			KiB(slope(float64(lo), a.live, float64(hi), z.live)), KiB(slope(float64(lo), a.proc.RSS, float64(hi), z.proc.RSS)), cached})
	}
	return table(fmt.Sprintf("Memory per claim, from N=%d to N=%d claims in place: the live heap's and RSS's growth per claim against "+
		"what the objects a controller caches for a claim take (typed, through its cache's transforms; measured in the benchmark's "+
		"process on the cluster's objects); the rest is indexes, queues and bookkeeping", lo, hi), rows)
}

// kib is a size in KiB, unsigned.
func kib(bytes float64) string { return strings.TrimPrefix(KiB(bytes), "+") }

// projectedServices is the Service count the memory projection is made for.
const projectedServices = 50000

// serviceSlopes is the note on memory per Service between the smallest and
// the largest Service count of memAtServices, and each controller's live
// heap and RSS projected to projectedServices from that slope. "" until
// two counts are measured.
func serviceSlopes(at map[int]map[string]memSample, objs map[string]map[string]float64) string {
	lo, hi, ok := span(at)
	if !ok {
		return ""
	}
	rows := [][]string{{"CONTROLLER", fmt.Sprintf("LIVE HEAP %d SERVICES", lo), fmt.Sprintf("%d", hi), "PER SERVICE", "RSS PER SERVICE",
		fmt.Sprintf("LIVE HEAP AT %d", projectedServices), fmt.Sprintf("RSS AT %d", projectedServices)}}
	for _, ctl := range cluster.Controllers {
		a, z := at[lo][ctl], at[hi][ctl]
		live := slope(float64(lo), a.live, float64(hi), z.live)
		rss := slope(float64(lo), a.proc.RSS, float64(hi), z.proc.RSS)
		more := float64(projectedServices - hi)
		rows = append(rows, []string{ctl, MiB(a.live), MiB(z.live), KiB(live), KiB(rss), MiB(z.live + live*more), MiB(z.proc.RSS + rss*more)})
	}
	title := fmt.Sprintf("Memory per Service, from %d to %d Services in the cluster: the growth per Service, and each controller "+
		"projected to %d Services on that slope", lo, hi, projectedServices)
	for _, ctl := range servicesCachers() {
		if v, ok := objs[ctl][kindService]; ok {
			title += fmt.Sprintf("; one plain Service cached by %s (typed, trimmed) takes %s; only %s cache every Service",
				ctl, kib(v), strings.Join(servicesCachers(), " + "))
			break
		}
	}
	return table(title, rows)
}

func servicesCachers() []string {
	var out []string
	for _, ctl := range cluster.Controllers {
		if cachesServices[ctl] {
			out = append(out, ctl)
		}
	}
	return out
}

func TestMemorySlopes(t *testing.T) {
	mem := func(liveMiB, rssMiB float64) memSample {
		return memSample{live: liveMiB * (1 << 20), proc: ProcMem{RSS: rssMiB * (1 << 20)}}
	}
	at := map[int]map[string]memSample{}
	require.Empty(t, memorySlopes(at, nil), "nothing measured")
	at[200] = map[string]memSample{"class": mem(4, 40), "claim": mem(8, 50), "service": mem(8, 50), "ipaddress": mem(8, 50)}
	require.Empty(t, memorySlopes(at, nil), "one N: no slope")
	at[1000] = map[string]memSample{"class": mem(5, 41), "claim": mem(16, 66), "service": mem(12, 58), "ipaddress": mem(10, 54)}
	objs := map[string]map[string]float64{"class": {kindAddress: 2048}, "claim": {kindClaim: 1024, kindAddress: 2048, kindPlaceholder: 512}}
	out := memorySlopes(at, objs)
	// claim: 8 MiB over 800 claims is 10.24 KiB per claim; RSS 16 MiB is 20.48.
	require.Contains(t, out, "claim       8.0 MiB")
	require.Contains(t, out, "+10.2 KiB")
	require.Contains(t, out, "+20.5 KiB")
	require.Contains(t, out, "3.5 KiB (IPAddressClaim 1.0 KiB + IPAddress 2.0 KiB + placeholder Service 0.5 KiB)")
	require.Contains(t, out, "2.0 KiB (IPAddress 2.0 KiB)", "the class controller caches only addresses")

	svcs := map[int]map[string]memSample{
		221:  {"class": mem(4, 40), "claim": mem(8, 50), "service": mem(8, 50), "ipaddress": mem(8, 50)},
		1121: {"class": mem(4, 40), "claim": mem(8, 50), "service": mem(12.5, 59), "ipaddress": mem(10, 54)},
	}
	out = serviceSlopes(svcs, map[string]map[string]float64{"service": {kindService: 1500}})
	// service: 4.5 MiB over 900 Services is 5.12 KiB each; at 50,000
	// Services 12.5 MiB + 48,879 x 5.12 KiB = 256.9 MiB.
	require.Contains(t, out, "+5.1 KiB")
	require.Contains(t, out, "256.9 MiB")
	require.Contains(t, out, "only service + ipaddress cache every Service")
}

// TestTransformOf: the objects are measured through each controller's own
// cache transform for the kind, the default where it has none.
func TestTransformOf(t *testing.T) {
	ptr := func(f toolscache.TransformFunc) uintptr { return reflect.ValueOf(f).Pointer() }
	tests := []struct {
		ctl  string
		obj  client.Object
		want toolscache.TransformFunc
	}{
		{"claim", &iadv1alpha1.IPAddressClaim{}, compact.WithoutConditions},
		{"claim", &iadv1alpha1.IPAddress{}, compact.ConditionStates},
		{"claim", &corev1.Service{}, servicecache.Trim},
		{"class", &iadv1alpha1.IPAddress{}, compact.WithoutConditions},
		{"service", &iadv1alpha1.IPAddressClaim{}, compact.WithoutConditions},
		{"service", &iadv1alpha1.IPAddress{}, compact.Object},
		{"ipaddress", &corev1.Service{}, servicecache.Trim},
		{"ipaddress", &iadv1alpha1.IPAddress{}, compact.Object},
	}
	for _, tt := range tests {
		assert.Equal(t, ptr(tt.want), ptr(transformOf(tt.ctl, tt.obj)), "%s %T", tt.ctl, tt.obj)
	}
}
