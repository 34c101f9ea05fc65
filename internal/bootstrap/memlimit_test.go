package bootstrap

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSoftMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		content string
		own     int64
		want    int64
		ok      bool
	}{
		{"268435456\n", 0, 241591910, true},           // 256 MiB, nothing resident: 90 %
		{"268435456\n", 26 * mib, 217055232, true},    // 256 MiB, the binary's 26 MiB: 90 % of 230 MiB
		{"83886080\n", 26 * mib, 50960793, true},      // 80 MiB: 90 % of 54 MiB
		{"67108864\n", 40 * mib, 32 * mib, true},      // 64 MiB, 40 resident: never under half the limit
		{"67108864\n", -1, 60397977, true},            // a nonsense reading counts as none
		{"max\n", 26 * mib, 0, false},                 // cgroup v2, no limit
		{"9223372036854771712\n", 26 * mib, 0, false}, // cgroup v1, no limit
		{"", 0, 0, false},
		{"junk", 0, 0, false},
		{"0", 0, 0, false},
	} {
		got, ok := softMemoryLimit(tc.content, tc.own)
		assert.Equal(t, tc.ok, ok, "%q, %d", tc.content, tc.own)
		assert.Equal(t, tc.want, got, "%q, %d", tc.content, tc.own)
	}
}

func TestResidentFile(t *testing.T) {
	status := "Name:\tclaim\nVmRSS:\t   59012 kB\nRssAnon:\t   33100 kB\nRssFile:\t   25800 kB\nRssShmem:\t       0 kB\n"
	assert.Equal(t, int64(25800*1024), residentFile(status))
	assert.Zero(t, residentFile("Name:\tclaim\n"))
	assert.Zero(t, residentFile("RssFile:\tjunk kB\n"))
}
