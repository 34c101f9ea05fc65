package stale

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/marks"
)

func TestFreeHolders(t *testing.T) {
	v4, err := classparams.ParseAddressRange("10.77.3.0-10.77.3.7")
	require.NoError(t, err)
	v6, err := classparams.ParseAddressRange("fd00:77:3::/125")
	require.NoError(t, err)
	ranges := []classparams.AddressRange{v4, v6}
	ev := func(name, reason, msg string) corev1.Event {
		return corev1.Event{Reason: reason, Message: msg, ObjectMeta: metav1.ObjectMeta{Namespace: "iad"},
			InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "iad", Name: name}}
	}
	evs := []corev1.Event{
		ev("warm-ipv4-a", ReasonIPAllocated, `Assigned IP ["10.77.3.0"]`),
		ev("hold-ip-10-77-3-5", ReasonIPAllocated, `Assigned IP ["10.77.3.5"]`),
		ev("alloc-ipv4-b", AllocationFailed, `Failed to allocate IP for "iad/alloc-ipv4-b": no available IPs`),
		ev("other-pool", ReasonIPAllocated, `Assigned IP ["10.99.0.1"]`),
		ev("warm-ipv6-c", ReasonIPAllocated, `Assigned IP ["fd00:77:3::2"]`),
		ev("dual", ReasonIPAllocated, `Assigned IP ["10.77.3.1","fd00:77:3::1"]`),
		{Reason: ReasonIPAllocated, Message: `Assigned IP ["10.77.3.2"]`, ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a"},
			InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "tenant-b", Name: "forged"}},
		{Reason: ReasonIPAllocated, Message: `Assigned IP ["10.77.3.3"]`, ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a"},
			InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "tenant-a", Name: "svc"}},
	}
	ledger := map[string]bool{"10.77.3.5": true}
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "iad", Name: n} }

	ips := func(m map[types.NamespacedName]Assignment) map[types.NamespacedName]string {
		out := map[types.NamespacedName]string{}
		for k, v := range m {
			out[k] = v.IP
		}
		return out
	}
	assert.Equal(t, map[types.NamespacedName]string{key("warm-ipv4-a"): "10.77.3.0", key("dual"): "10.77.3.1",
		{Namespace: "tenant-a", Name: "svc"}: "10.77.3.3"},
		ips(freeHolders(evs, iadv1alpha1.FamilyIPv4, ranges, ledger)),
		"free IPv4 addresses of the class only: not the ledger's, not another pool's, not a refusal, "+
			"not a Service an Event of another namespace names")
	assert.Equal(t, map[types.NamespacedName]string{key("warm-ipv6-c"): "fd00:77:3::2", key("dual"): "fd00:77:3::1"},
		ips(freeHolders(evs, iadv1alpha1.FamilyIPv6, ranges, ledger)))
	assert.Empty(t, freeHolders(evs, iadv1alpha1.FamilyIPv4, ranges,
		map[string]bool{"10.77.3.0": true, "10.77.3.1": true, "10.77.3.3": true, "10.77.3.5": true}), "every address in the ledger")
}

func TestClearedSince(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ph := func(name string, poked time.Time) *corev1.Service {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if !poked.IsZero() {
			svc.Annotations = map[string]string{marks.KeyMetalLBRetry: poked.Format(time.RFC3339Nano)}
		}
		return svc
	}
	never := ph("never-poked", time.Time{})
	before := ph("poked-before", t0.Add(time.Second))
	after := ph("poked-after", t0.Add(time.Minute))
	refused := []*corev1.Service{never, before, after}

	assert.Equal(t, []*corev1.Service{never, before}, clearedSince(refused, t0, t0.Add(30*time.Second)),
		"a clear since the refusal or the last poke")
	assert.Empty(t, clearedSince(refused, t0, t0.Add(-time.Second)), "the last clear came before the refusal")
	assert.Empty(t, clearedSince(refused, t0, time.Time{}), "nothing cleared yet")
}

func TestRefusalWait(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	poked := func(at time.Time) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{marks.KeyMetalLBRetry: at.Format(time.RFC3339Nano)}}}
	}
	never := &corev1.Service{}
	for _, tc := range []struct {
		name    string
		refused []*corev1.Service
		now     time.Time
		want    time.Duration
	}{
		{"refused a moment ago", []*corev1.Service{never}, t0.Add(3 * time.Second), Wait - 3*time.Second},
		{"refused long ago", []*corev1.Service{never}, t0.Add(time.Minute), Wait - time.Minute},
		{"poked a moment ago", []*corev1.Service{never, poked(t0.Add(55 * time.Second))}, t0.Add(time.Minute), Wait - 5*time.Second},
		{"poked long ago", []*corev1.Service{poked(t0.Add(time.Second))}, t0.Add(time.Minute), Wait - 59*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, refusalWait(tc.refused, t0, tc.now))
		})
	}
}
