package service

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

func TestStallDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		waited    time.Duration
		warned    bool
		wantWarn  bool
		wantAfter time.Duration
	}{
		{"first sight: look again when the minute is up", 0, false, false, StallAfter},
		{"half-way", 25 * time.Second, false, false, StallAfter - 25*time.Second},
		{"the minute is up: say it", StallAfter, false, true, 0},
		{"long past: say it", 10 * StallAfter, false, true, 0},
		{"said already: once per attach", 10 * StallAfter, true, false, 0},
	} {
		warn, after := stallDue(t0, t0.Add(tt.waited), tt.warned, StallAfter)
		assert.Equal(t, tt.wantWarn, warn, tt.name)
		assert.Equal(t, tt.wantAfter, after, tt.name)
	}
}

func TestStallsAreKeptPerServiceUID(t *testing.T) {
	var st stalls
	key := types.NamespacedName{Namespace: "shop", Name: "web"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	since, warned := st.see(key, "uid-1", t0)
	assert.Equal(t, t0, since)
	assert.False(t, warned)
	since, _ = st.see(key, "uid-1", t0.Add(time.Minute))
	assert.Equal(t, t0, since, "the same attach keeps its start")
	st.said(key)
	_, warned = st.see(key, "uid-1", t0.Add(2*time.Minute))
	assert.True(t, warned)
	since, warned = st.see(key, "uid-2", t0.Add(3*time.Minute))
	assert.Equal(t, t0.Add(3*time.Minute), since, "a Service created again starts again")
	assert.False(t, warned)
	st.forget(key)
	since, _ = st.see(key, "uid-2", t0.Add(4*time.Minute))
	assert.Equal(t, t0.Add(4*time.Minute), since, "a finished attach is forgotten")
}

func TestMsgAttachStalled(t *testing.T) {
	assert.Equal(t, `The attach of claim "web-ip" has not completed in 1m2s: waiting for the holds to let go of the addresses`,
		msgAttachStalled("web-ip", 62*time.Second+300*time.Millisecond, "the holds to let go of the addresses"))
}
