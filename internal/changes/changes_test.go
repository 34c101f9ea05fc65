package changes

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMemo(t *testing.T) {
	var m Memo
	steps := []struct {
		key, value string
		want       bool
	}{
		{"a", "", false},
		{"a", "PoolExhausted", true},
		{"a", "PoolExhausted", false},
		{"b", "PoolExhausted", true},
		{"a", "PoolNotReady", true},
		{"a", "", true},
		{"a", "PoolNotReady", true},
	}
	for i, s := range steps {
		assert.Equal(t, s.want, m.Changed(s.key, s.value), "step %d: %s=%q", i, s.key, s.value)
	}
	m.Forget("a")
	assert.True(t, m.Changed("a", "PoolNotReady"), "forgotten")
	m.Changed("c/1", "x")
	m.Changed("c/2", "x")
	m.ForgetPrefix("c/")
	assert.True(t, m.Changed("c/1", "x"))
	assert.True(t, m.Changed("c/2", "x"))
	assert.False(t, m.Changed("b", "PoolExhausted"), "other keys kept")
}
