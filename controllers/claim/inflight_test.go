package claim

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

func TestInFlight(t *testing.T) {
	now := time.Now()
	v4, v6 := iadv1alpha1.FamilyIPv4, iadv1alpha1.FamilyIPv6
	listed := func(names ...string) []corev1.Service {
		var out []corev1.Service
		for _, n := range names {
			out = append(out, corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		return out
	}
	fresh, old := now.Add(-time.Millisecond), now.Add(-inflightMax)
	tests := []struct {
		name  string
		book  map[string]inflightDraw
		drawn []corev1.Service
		want  int
	}{
		{"nothing in flight", nil, listed("a"), 0},
		{"a draw the cache does not show", map[string]inflightDraw{"a": {f: v4, since: fresh}}, nil, 1},
		{"two draws of the family", map[string]inflightDraw{"a": {f: v4, since: fresh}, "b": {f: v4, since: fresh}}, listed("c"), 2},
		{"the cache lists it: counted there, not twice", map[string]inflightDraw{"a": {f: v4, since: fresh}, "b": {f: v4, since: fresh}}, listed("a"), 1},
		{"another family takes other room", map[string]inflightDraw{"a": {f: v4, since: fresh}, "b": {f: v6, since: fresh}}, nil, 1},
		{"a draw whose watch event never came leaves after inflightMax", map[string]inflightDraw{"a": {f: v4, since: old}, "b": {f: v4, since: fresh}}, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, inFlight(tt.book, v4, tt.drawn, now))
		})
	}
}

func TestClassBook(t *testing.T) {
	var l drawLocks
	now := time.Now()
	c := l.of("public")
	assert.Same(t, c, l.of("public"), "one book per class")
	assert.Equal(t, 1, c.reserve("a", iadv1alpha1.FamilyIPv4, now))
	assert.Equal(t, 2, c.reserve("b", iadv1alpha1.FamilyIPv6, now))
	assert.True(t, c.inBook("a", now))
	assert.False(t, c.inBook("a", now.Add(inflightMax)), "too old to count")

	l.settle("public", "a")
	l.settle("private", "b") // another class's: nothing, and no book made for it
	assert.Len(t, l.m, 1)
	assert.False(t, c.inBook("a", now))
	assert.Equal(t, map[string]inflightDraw{"b": {f: iadv1alpha1.FamilyIPv6, since: now}}, c.book(now))
	assert.Empty(t, c.book(now.Add(inflightMax)), "forgotten once too old")
	assert.False(t, c.inBook("b", now))
}

// TestBookNeverOverdraws plays the claim controller's protocol with many
// passes at once: each decides under the class's lock from the cache (a
// list of placeholders) and the book, then creates outside it, and the
// cache shows the placeholder some time later, when the draw leaves the
// book. However the passes interleave, no more draws are made than the
// class has room for, and all of that room is used.
func TestBookNeverOverdraws(t *testing.T) {
	const room, passes = 7, 40
	var l drawLocks
	var cacheMu sync.Mutex
	var cache []corev1.Service
	cached := func() []corev1.Service {
		cacheMu.Lock()
		defer cacheMu.Unlock()
		return append([]corev1.Service(nil), cache...)
	}
	var drawsMu sync.Mutex
	drawn := 0
	var wg sync.WaitGroup
	for i := range passes {
		wg.Go(func() {
			name := fmt.Sprintf("alloc-ipv4-%02d", i)
			b := l.of("public")
			b.decide.Lock()
			now := time.Now()
			book := b.book(now) // the book first, then the cache
			phs := cached()
			ok := len(phs)+inFlight(book, iadv1alpha1.FamilyIPv4, phs, now) < room
			if ok {
				b.reserve(name, iadv1alpha1.FamilyIPv4, now)
			}
			b.decide.Unlock()
			if !ok {
				return
			}
			drawsMu.Lock()
			drawn++
			drawsMu.Unlock()
			time.Sleep(time.Duration(i%5) * time.Millisecond) // the create, and the watch's delay
			cacheMu.Lock()
			cache = append(cache, corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name,
				Annotations: map[string]string{marks.AnnotationFamily: string(iadv1alpha1.FamilyIPv4)}}})
			cacheMu.Unlock()
			l.settle("public", name) // the watch event, after the cache
		})
	}
	wg.Wait()
	assert.Equal(t, room, drawn)
	require.Len(t, cached(), room)
	assert.Empty(t, l.of("public").book(time.Now()), "every draw left the book")
}

func TestAnswered(t *testing.T) {
	now := metav1.Now()
	ph := func(role, ingress string) *corev1.Service {
		s := renderPlaceholder("ph", testClaim(iadv1alpha1.FamilyIPv4), "public", iadv1alpha1.FamilyIPv4)
		s.Labels[marks.LabelPlaceholder] = role
		if ingress != "" {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ingress}}
		}
		return s
	}
	going := ph(names.PlaceholderAllocation, "192.0.2.1")
	going.DeletionTimestamp = &now
	tests := []struct {
		name string
		ph   *corev1.Service
		want bool
	}{
		{"waiting for MetalLB", ph(names.PlaceholderAllocation, ""), false},
		{"answered", ph(names.PlaceholderAllocation, "192.0.2.1"), true},
		{"answered in another family", ph(names.PlaceholderAllocation, "2001:db8::1"), false},
		{"handed over", ph(names.PlaceholderHold, "192.0.2.1"), false},
		{"a warm placeholder", ph(names.PlaceholderWarm, "192.0.2.1"), false},
		{"being deleted", going, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, answered(tt.ph))
		})
	}
	assert.False(t, answered(&iadv1alpha1.IPAddressClaim{}), "not a Service")
}
