package cluster

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// reapOrphans kills control-plane processes left behind by an earlier run
// that could not stop them (a test binary that panicked or was killed
// outright: envtest's etcd and kube-apiserver have no parent-death signal).
// It only touches processes that run one of this project's control-plane
// binaries and whose parent is gone (they were re-parented to init), so
// clusters of test binaries running in parallel are never affected.
func reapOrphans() {
	ours := map[string]bool{}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "metallb-controller"} {
		if p, err := filepath.EvalSymlinks(filepath.Join(BinDir(), b)); err == nil {
			ours[p] = true
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !ours[exe] {
			continue
		}
		if parentOf(pid) == 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// parentOf reads a process's parent pid from /proc/<pid>/stat; 0 if unknown.
func parentOf(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}
