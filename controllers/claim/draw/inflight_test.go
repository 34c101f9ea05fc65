package draw

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
	fresh, old := now.Add(-time.Millisecond), now.Add(-InflightMax)
	tests := []struct {
		name  string
		book  map[string]InFlightDraw
		drawn []corev1.Service
		want  int
	}{
		{"nothing in flight", nil, listed("a"), 0},
		{"a draw the cache does not show", map[string]InFlightDraw{"a": {F: v4, Since: fresh}}, nil, 1},
		{"two draws of the family", map[string]InFlightDraw{"a": {F: v4, Since: fresh}, "b": {F: v4, Since: fresh}}, listed("c"), 2},
		{"the cache lists it: counted there, not twice", map[string]InFlightDraw{"a": {F: v4, Since: fresh}, "b": {F: v4, Since: fresh}}, listed("a"), 1},
		{"another family takes other room", map[string]InFlightDraw{"a": {F: v4, Since: fresh}, "b": {F: v6, Since: fresh}}, nil, 1},
		{"a draw whose watch event never came leaves after inflightMax", map[string]InFlightDraw{"a": {F: v4, Since: old}, "b": {F: v4, Since: fresh}}, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, InFlight(tt.book, v4, tt.drawn, now))
		})
	}
}

func TestClassBook(t *testing.T) {
	var l Locks
	now := time.Now()
	c := l.Of("public")
	assert.Same(t, c, l.Of("public"), "one book per class")
	assert.Equal(t, 1, c.Reserve("a", iadv1alpha1.FamilyIPv4, now))
	assert.Equal(t, 2, c.Reserve("b", iadv1alpha1.FamilyIPv6, now))
	assert.True(t, c.InBook("a", now))
	assert.False(t, c.InBook("a", now.Add(InflightMax)), "too old to count")

	l.Settle("public", "a")
	l.Settle("private", "b") // another class's: nothing, and no book made for it
	assert.Len(t, l.m, 1)
	assert.False(t, c.InBook("a", now))
	assert.Equal(t, map[string]InFlightDraw{"b": {F: iadv1alpha1.FamilyIPv6, Since: now}}, c.Draws(now))
	assert.Empty(t, c.Draws(now.Add(InflightMax)), "forgotten once too old")
	assert.False(t, c.InBook("b", now))
}

// TestBookNeverOverdraws plays the claim controller's protocol with many
// passes at once: each decides under the class's lock from the cache (a
// list of placeholders) and the book, then creates outside it, and the
// cache shows the placeholder some time later, when the draw leaves the
// book. However the passes interleave, no more draws are made than the
// class has room for, and all of that room is used.
func TestBookNeverOverdraws(t *testing.T) {
	const room, passes = 7, 40
	var l Locks
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
			b := l.Of("public")
			b.Decide.Lock()
			now := time.Now()
			book := b.Draws(now) // the book first, then the cache
			phs := cached()
			ok := len(phs)+InFlight(book, iadv1alpha1.FamilyIPv4, phs, now) < room
			if ok {
				b.Reserve(name, iadv1alpha1.FamilyIPv4, now)
			}
			b.Decide.Unlock()
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
			l.Settle("public", name) // the watch event, after the cache
		})
	}
	wg.Wait()
	assert.Equal(t, room, drawn)
	require.Len(t, cached(), room)
	assert.Empty(t, l.Of("public").Draws(time.Now()), "every draw left the book")
}

func TestDrawPauses(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var p Pauses
	assert.Zero(t, p.Left("c/IPv4", t0), "nothing given back: no pause")

	// The same address, back to back: the pause doubles, up to the bound.
	now := t0
	var got []time.Duration
	for range 8 {
		d := p.GaveBack("c/IPv4", "10.0.0.2", now)
		got = append(got, d)
		now = now.Add(d)
	}
	assert.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, time.Minute, time.Minute, time.Minute}, got)

	p.Forget("c/IPv4")
	assert.Equal(t, GiveBackPause, p.GaveBack("c/IPv4", "10.0.0.2", now), "recorded meanwhile: starts over")
	assert.Equal(t, GiveBackPause, p.GaveBack("c/IPv4", "10.0.0.3", now), "another address: starts over")
	assert.Equal(t, 2*GiveBackPause, p.GaveBack("c/IPv4", "10.0.0.3", now))

	assert.Equal(t, 4*time.Second, p.Left("c/IPv4", now))
	assert.Equal(t, time.Second, p.Left("c/IPv4", now.Add(3*time.Second)))
	assert.Zero(t, p.Left("c/IPv4", now.Add(4*time.Second)), "over")
	assert.Zero(t, p.Left("c/IPv6", now), "per family")
	assert.Zero(t, p.Left("d/IPv4", now), "per claim")

	later := now.Add(4*time.Second + MaxGiveBackPause + time.Second)
	assert.Equal(t, GiveBackPause, p.GaveBack("c/IPv4", "10.0.0.3", later), "long after the last pause: starts over")
	p.GaveBack("d/IPv4", "10.0.0.9", later.Add(2*MaxGiveBackPause+GiveBackPause))
	assert.Len(t, p.m, 1, "pauses long over are forgotten")
}

func TestRefillDelays(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		at, lack int
		want     time.Duration
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a first shortfall waits the quiet time", []step{{0, 3, refillQuiet}, {100, 3, 200 * time.Millisecond}, {300, 3, 0}}},
		{"a shortfall that grows waits again", []step{{0, 1, refillQuiet}, {200, 5, refillQuiet}, {400, 5, 100 * time.Millisecond}, {500, 5, 0}}},
		{"a shortfall that shrinks does not", []step{{0, 5, refillQuiet}, {200, 2, 100 * time.Millisecond}}},
		{"a burst that goes on is refilled after refillMax", []step{{0, 1, refillQuiet}, {250, 2, refillQuiet}, {1900, 30, 100 * time.Millisecond}, {2000, 31, 0}}},
		{"once refilled, the next shortfall starts anew", []step{{0, 1, refillQuiet}, {300, 1, 0}, {5000, 2, refillQuiet}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r RefillDelays
			for _, s := range tc.steps {
				assert.Equal(t, s.want, r.Wait("c/IPv4", s.lack, at(s.at)), "at %d ms, %d missing", s.at, s.lack)
			}
			assert.Equal(t, refillQuiet, r.Wait("other/IPv4", 1, at(0)), "classes and families wait apart")
		})
	}
}
