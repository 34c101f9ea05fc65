package bootstrap

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSoftMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		content string
		want    int64
		ok      bool
	}{
		{"268435456\n", 241591910, true},    // 256 MiB: 90 %
		{"max\n", 0, false},                 // cgroup v2, no limit
		{"9223372036854771712\n", 0, false}, // cgroup v1, no limit
		{"", 0, false},
		{"junk", 0, false},
		{"0", 0, false},
	} {
		got, ok := softMemoryLimit(tc.content)
		assert.Equal(t, tc.ok, ok, "%q", tc.content)
		assert.Equal(t, tc.want, got, "%q", tc.content)
	}
}
