package claim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDrawPauses(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var p drawPauses
	assert.Zero(t, p.left("c/IPv4", t0), "nothing given back: no pause")

	// The same address, back to back: the pause doubles, up to the bound.
	now := t0
	var got []time.Duration
	for range 8 {
		d := p.gaveBack("c/IPv4", "10.0.0.2", now)
		got = append(got, d)
		now = now.Add(d)
	}
	assert.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, time.Minute, time.Minute, time.Minute}, got)

	p.forget("c/IPv4")
	assert.Equal(t, giveBackPause, p.gaveBack("c/IPv4", "10.0.0.2", now), "recorded meanwhile: starts over")
	assert.Equal(t, giveBackPause, p.gaveBack("c/IPv4", "10.0.0.3", now), "another address: starts over")
	assert.Equal(t, 2*giveBackPause, p.gaveBack("c/IPv4", "10.0.0.3", now))

	assert.Equal(t, 4*time.Second, p.left("c/IPv4", now))
	assert.Equal(t, time.Second, p.left("c/IPv4", now.Add(3*time.Second)))
	assert.Zero(t, p.left("c/IPv4", now.Add(4*time.Second)), "over")
	assert.Zero(t, p.left("c/IPv6", now), "per family")
	assert.Zero(t, p.left("d/IPv4", now), "per claim")

	later := now.Add(4*time.Second + maxGiveBackPause + time.Second)
	assert.Equal(t, giveBackPause, p.gaveBack("c/IPv4", "10.0.0.3", later), "long after the last pause: starts over")
	p.gaveBack("d/IPv4", "10.0.0.9", later.Add(2*maxGiveBackPause+giveBackPause))
	assert.Len(t, p.m, 1, "pauses long over are forgotten")
}
