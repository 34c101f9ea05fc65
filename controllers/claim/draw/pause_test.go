package draw

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

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
