package bootstrap

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitShare is the part of the container's memory limit the Go
// runtime is asked to stay under: the rest is the binary's own pages and
// what the runtime cannot give back at once.
const memoryLimitShare = 0.9

// The cgroup files naming the container's memory limit: v2, then v1.
var cgroupMemoryLimits = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// softMemoryLimit is the soft limit for a container limited to the
// contents of a cgroup memory limit file, and whether there is one: "max"
// or a v1 value past any real machine's memory means none.
func softMemoryLimit(content string) (int64, bool) {
	v := strings.TrimSpace(content)
	if v == "" || v == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n >= math.MaxInt64/2 {
		return 0, false
	}
	return int64(float64(n) * memoryLimitShare), true
}

// followMemoryLimit sets the Go runtime's soft memory limit to
// memoryLimitShare of the container's memory limit, unless GOMEMLIMIT
// sets it already: between collections the heap grows to twice what is
// live, and a cluster with more Services than the limit was sized for
// would otherwise be killed for memory it was about to give back. It
// returns the limit set, 0 for none.
func followMemoryLimit() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	for _, path := range cgroupMemoryLimits {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if limit, ok := softMemoryLimit(string(b)); ok {
			debug.SetMemoryLimit(limit)
			return limit
		}
		return 0
	}
	return 0
}
