package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/parking"
)

// at is t0 plus ms milliseconds; a negative ms is the zero time (never seen).
func at(ms int) time.Time {
	if ms < 0 {
		return time.Time{}
	}
	return time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
}

func times(ms ...int) []time.Time {
	out := make([]time.Time, len(ms))
	for i, m := range ms {
		out[i] = at(m)
	}
	return out
}

func TestHops(t *testing.T) {
	seen := func(ms int) Hop { return Hop{D: time.Duration(ms) * time.Millisecond, Seen: true} }
	for _, tc := range []struct {
		name string
		at   []time.Time
		want []Hop
	}{
		{"every state in order", times(0, 5, 15, 40, 41, 60), []Hop{seen(5), seen(10), seen(25), seen(1), seen(19)}},
		{"a skipped state is not seen, and the next hop runs from the one before it",
			times(0, 5, -1, -1, 30, 50), []Hop{seen(5), {}, {}, seen(25), seen(20)}},
		{"a state seen before an earlier one counts 0, and the next runs from the latest",
			times(0, 10, 30, 20, 35), []Hop{seen(10), seen(20), {Seen: true, Early: true}, seen(5)}},
		{"a state seen before the start is early", times(100, 90, 120), []Hop{{Seen: true, Early: true}, seen(20)}},
		{"the last state never seen", times(0, 5, -1), []Hop{seen(5), {}}},
		{"no start: no hops", times(-1, 5, 10), nil},
		{"a single state: no hop", times(0), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Hops(tc.at))
		})
	}
}

func TestHopsAddUpToTheLastState(t *testing.T) {
	for _, ms := range [][]int{{0, 5, 15, 40, 41, 60}, {0, 10, 30, 20, 35}, {0, -1, 7, -1, 9}} {
		var sum time.Duration
		for _, h := range Hops(times(ms...)) {
			sum += h.D
		}
		assert.Equal(t, at(ms[len(ms)-1]).Sub(at(0)), sum, "%v", ms)
	}
}

func TestSummarizeHops(t *testing.T) {
	items := [][]time.Time{
		times(0, 10, 20, -1),
		times(0, 30, 40, -1),
		times(0, 20, 10, -1), // the second state before the first
	}
	hs := SummarizeHops(items, 4)
	assert.Equal(t, []HopSummary{
		{Summary: Summary{N: 3, Min: ms(10), P50: ms(20), P95: ms(30), Max: ms(30), Mean: ms(20)}},
		{Summary: Summary{N: 3, Min: 0, P50: ms(10), P95: ms(10), Max: ms(10), Mean: ms(20) / 3}, Early: 1},
		{},
	}, hs)
	assert.Equal(t, "20ms / 30ms", HopCell(hs[0], 3))
	assert.Equal(t, "–", HopCell(hs[2], 3), "a hop no item saw is not zero")
	assert.Equal(t, "10ms / 10ms (2 of 3)", HopCell(HopSummary{Summary: Summary{N: 2, P50: ms(10), P95: ms(10)}}, 3))
	assert.Equal(t, "MetalLB answered 1", EarlyCell(hs, []string{"created", "stamped", "MetalLB answered", "drawn"}))
	assert.Equal(t, "-", EarlyCell(hs[:1], ClaimStates))
	assert.Nil(t, SummarizeHops(items, 1))
	assert.Equal(t, []string{"-> STAMPED", "-> DRAWN", "-> METALLB ANSWERED", "-> IPADDRESS RECORDED", "-> BOUND"}, HopHeader(ClaimStates))
}

func TestStates(t *testing.T) {
	svc := func(ann map[string]string, ingress ...string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: ann}}
		for _, ip := range ingress {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		return s
	}
	addr := func(to *iadv1alpha1.WorkloadReference, held ...metav1.ConditionStatus) *iadv1alpha1.IPAddress {
		a := &iadv1alpha1.IPAddress{Status: iadv1alpha1.IPAddressStatus{AssociatedTo: to}}
		for _, st := range held {
			a.Status.Conditions = append(a.Status.Conditions, metav1.Condition{Type: conditions.Held, Status: st})
		}
		return a
	}
	claim := func(ann map[string]string) *iadv1alpha1.IPAddressClaim {
		return &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Annotations: ann}}
	}
	web := &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "ns", Name: "web"}
	for _, tc := range []struct {
		name string
		cond func(client.Object) bool
		obj  client.Object
		want bool
	}{
		{"a claim not stamped yet", isStamped, claim(nil), false},
		{"a stamped claim", isStamped, claim(map[string]string{iadv1alpha1.ProvisionerAnnotation: names.Provisioner}), true},
		{"a placeholder MetalLB has not answered", isAnswered, svc(nil), false},
		{"a placeholder MetalLB answered", isAnswered, svc(nil, "10.200.0.1"), true},
		{"an address associated to nothing", isAssociatedTo("ns", "web"), addr(nil), false},
		{"an address associated to the Service", isAssociatedTo("ns", "web"), addr(web), true},
		{"an address associated to another Service", isAssociatedTo("ns", "api"), addr(web), false},
		{"a hold pinned to its address", isParked, svc(map[string]string{marks.KeyPool: "iad-c", marks.KeyPin: "10.200.0.1"}), false},
		{"a hold asking for the parking pool with its pin left", isParked,
			svc(map[string]string{marks.KeyPool: parking.DefaultPool, marks.KeyPin: "10.200.0.1"}), false},
		{"a parked hold", isParked, svc(map[string]string{marks.KeyPool: parking.DefaultPool}), true},
		{"an address with no Held condition", isUnheld, addr(web), false},
		{"an address still held", isUnheld, addr(web, metav1.ConditionTrue), false},
		{"an address unheld", isUnheld, addr(web, metav1.ConditionFalse), true},
		{"a Service pinned by hand", isPinnedTo("10.200.0.1"), svc(map[string]string{marks.KeyPin: "10.200.0.1"}), false},
		{"a Service the driver pinned elsewhere", isPinnedTo("10.200.0.1"),
			svc(map[string]string{marks.KeyPin: "10.200.0.2", marks.KeyPinnedBy: "ip-0"}), false},
		{"a Service the driver pinned to the address", isPinnedTo("10.200.0.1"),
			svc(map[string]string{marks.KeyPin: "10.200.0.1", marks.KeyPinnedBy: "ip-0"}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.cond(tc.obj))
		})
	}
}

func TestKeysOfPlaceholders(t *testing.T) {
	ph := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-iad-system", Name: "alloc-ipv4-u",
		Labels:      map[string]string{marks.LabelAddress: "ip-10-200-0-1"},
		Annotations: map[string]string{marks.AnnotationClaimNamespace: "ns", marks.AnnotationClaimName: "ip-0"}}}
	assert.Equal(t, []string{"service/metallb-iad-system/alloc-ipv4-u", placeholderOfKey("ns", "ip-0"), holdOfKey("ip-10-200-0-1")}, keysOf(ph))
	forged := ph.DeepCopy()
	forged.Namespace = "tenant"
	assert.Equal(t, []string{"service/tenant/alloc-ipv4-u"}, keysOf(forged), "only the driver's namespace holds placeholders")
}

func TestMachineCPUWindow(t *testing.T) {
	a := MachineCPU{Busy: 3 * time.Second, Total: 10 * time.Second}
	b := MachineCPU{Busy: 4 * time.Second, Total: 12 * time.Second}
	w := b.Sub(a)
	assert.Equal(t, MachineCPU{Busy: time.Second, Total: 2 * time.Second}, w)
	assert.InDelta(t, 0.5, w.Share(), 1e-9)
	assert.InDelta(t, 0.4, w.Add(MachineCPU{Busy: time.Second, Total: 3 * time.Second}).Share(), 1e-9, "windows add up before the share")
	assert.True(t, MachineCPU{}.Share() != MachineCPU{}.Share(), "an empty window has no share (NaN)")
}
