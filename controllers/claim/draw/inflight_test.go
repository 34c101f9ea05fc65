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
