package bootstrap

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitShare is the part of what the container's memory limit leaves
// beside the binary's own pages that the Go runtime is asked to stay
// under: the rest is what the runtime cannot give back at once.
const memoryLimitShare = 0.9

// The cgroup files naming the container's memory limit: v2, then v1.
var cgroupMemoryLimits = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// softMemoryLimit is the soft limit for a container limited to the
// contents of a cgroup memory limit file, whose binary keeps own bytes of
// its file resident, and whether there is one: "max" or a v1 value past
// any real machine's memory means none. The binary's pages count against
// the container's limit but not against the Go runtime's (about 25 MiB for
// a controller): the soft limit is memoryLimitShare of what they leave,
// and never under half the limit.
func softMemoryLimit(content string, own int64) (int64, bool) {
	v := strings.TrimSpace(content)
	if v == "" || v == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n >= math.MaxInt64/2 {
		return 0, false
	}
	return max(n/2, int64(float64(n-max(own, 0))*memoryLimitShare)), true
}

// residentFile is the RssFile of a /proc/<pid>/status (the file-backed
// pages resident, mostly the binary's own), in bytes; 0 when absent.
func residentFile(status string) int64 {
	for _, l := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(l, "RssFile:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb * 1024
	}
	return 0
}

// followMemoryLimit sets the Go runtime's soft memory limit from the
// container's memory limit (softMemoryLimit), unless GOMEMLIMIT sets it
// already: between collections the heap grows to twice what is live, and a
// cluster with more Services than the limit was sized for would otherwise
// be killed for memory it was about to give back. It is called once the
// manager is built, when most of the binary that runs is resident. It
// returns the limit set, 0 for none.
func followMemoryLimit() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	var own int64
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		own = residentFile(string(b))
	}
	for _, path := range cgroupMemoryLimits {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if limit, ok := softMemoryLimit(string(b), own); ok {
			debug.SetMemoryLimit(limit)
			return limit
		}
		return 0
	}
	return 0
}
