package service

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestHandoffMetrics(t *testing.T) {
	h := newHandoffs()
	now := time.Unix(1000, 0)
	h.now = func() time.Time { return now }
	key := types.NamespacedName{Namespace: "tenant", Name: "web"}
	countOf := func() (uint64, uint64) {
		return histogram(t, handoffSeconds).GetSampleCount(), histogram(t, handoffUnheldSeconds).GetSampleCount()
	}
	c0, u0 := countOf()
	s0, us0 := histogram(t, handoffSeconds).GetSampleSum(), histogram(t, handoffUnheldSeconds).GetSampleSum()

	h.released(key, "u1") // not started: ignored
	h.start(key, "u1")
	now = now.Add(2 * time.Second)
	h.start(key, "u1") // the first sight counts
	h.released(key, "u1")
	now = now.Add(time.Second)
	h.released(key, "u1")
	h.done(key, "u1", ModeGap)
	c1, u1 := countOf()
	assert.Equal(t, c0+1, c1)
	assert.Equal(t, u0+1, u1)
	assert.InDelta(t, 3.0, histogram(t, handoffSeconds).GetSampleSum()-s0, 1e-9, "from the first sight of the request")
	assert.InDelta(t, 1.0, histogram(t, handoffUnheldSeconds).GetSampleSum()-us0, 1e-9, "from the first sight of the release")

	// A shared handoff is measured, but has no unheld gap to observe.
	g0, sh0 := testutil.ToFloat64(handoffsTotal.WithLabelValues(directionAttach, ModeGap)), testutil.ToFloat64(handoffsTotal.WithLabelValues(directionAttach, ModeShared))
	h.start(key, "u3")
	h.released(key, "u3") // a late sight of the release (after the Service held the address)
	now = now.Add(time.Second)
	h.done(key, "u3", ModeShared)
	c3, u3 := countOf()
	assert.Equal(t, c1+1, c3, "the shared handoff is measured")
	assert.Equal(t, u1, u3, "no unheld gap is observed for a shared handoff")
	assert.Equal(t, sh0+1, testutil.ToFloat64(handoffsTotal.WithLabelValues(directionAttach, ModeShared)))
	assert.Equal(t, g0, testutil.ToFloat64(handoffsTotal.WithLabelValues(directionAttach, ModeGap)))
	c1 = c3

	h.done(key, "u1", ModeGap) // not started again: nothing observed
	h.start(key, "u2")
	h.forget(key)
	h.done(key, "u2", ModeGap)
	c2, u2 := countOf()
	assert.Equal(t, c1, c2)
	assert.Equal(t, u1, u2)
}

func histogram(t require.TestingT, h prometheus.Histogram) *dto.Histogram {
	m := &dto.Metric{}
	require.NoError(t, h.Write(m))
	return m.GetHistogram()
}
