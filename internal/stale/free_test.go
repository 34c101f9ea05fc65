package stale

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestStaleMemoClearsAgainAfterGrowingWaits(t *testing.T) {
	var m Memo
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := types.NamespacedName{Namespace: "iad", Name: "a"}
	b := types.NamespacedName{Namespace: "tenant", Name: "b"}
	assigned := t0.Add(-time.Minute)
	due := func(k types.NamespacedName, assigned, now time.Time) bool {
		ok, _ := m.due(k, assigned, now)
		return ok
	}

	assert.True(t, due(a, assigned, t0), "never cleared")
	assert.True(t, m.lastClear("c").IsZero(), "a clear is made once a Service was created and deleted")
	m.made("c", t0)
	assert.Equal(t, t0, m.lastClear("c"))
	assert.True(t, m.lastClear("other").IsZero(), "per class")
	ok, after := m.due(a, assigned, t0.Add(time.Second))
	assert.False(t, ok, "cleared for that assignment a moment ago")
	assert.Equal(t, Wait-time.Second, after, "until the first retry")
	assert.True(t, due(a, assigned, t0.Add(Wait)), "a clear MetalLB ignored is made again")
	assert.False(t, due(a, assigned, t0.Add(Wait+Wait)), "the second wait is twice the first")
	assert.True(t, due(a, assigned, t0.Add(3*Wait)))

	// The waits double up to RetryMax.
	now := t0.Add(3 * Wait)
	for range 10 {
		now = now.Add(RetryMax)
		require.True(t, due(a, assigned, now))
	}
	assert.False(t, due(a, assigned, now.Add(RetryMax-time.Second)))

	assert.True(t, due(b, assigned, t0), "another name")
	assert.True(t, due(b, t0.Add(time.Minute), t0.Add(time.Minute+time.Second)), "a later assignment starts afresh")
	assert.False(t, due(b, t0.Add(time.Minute), t0.Add(time.Minute+2*time.Second)))
	assert.True(t, due(types.NamespacedName{Namespace: "iad", Name: "c"}, t0, t0.Add(Forget+time.Minute)))
}
