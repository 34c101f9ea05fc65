//go:build integration

package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cozystack/metallb-iad/test/cluster"
)

// TestFailedStartStopsWhatItStarted: a Start that fails after etcd and the
// API server are up returns its own error and stops both, instead of losing
// the error to a panic and leaving them running.
func TestFailedStartStopsWhatItStarted(t *testing.T) {
	before := children(t)
	// The admin kubeconfig cannot be written into a folder that does not
	// exist, which fails Start after the API server came up.
	_, err := cluster.Start(context.Background(), cluster.Options{Dir: filepath.Join(t.TempDir(), "missing")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "admin.kubeconfig")
	assert.Eventually(t, func() bool { return children(t) == before }, 30*time.Second, 100*time.Millisecond,
		"the failed Start leaves no etcd or kube-apiserver running (before: %d)", before)
}

// children counts this test process's child processes that run etcd or
// kube-apiserver.
func children(t *testing.T) int {
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	me := os.Getpid()
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		comm, rest := s[open+1:end], strings.Fields(s[end+1:])
		if len(rest) < 2 || (comm != "etcd" && comm != "kube-apiserver") {
			continue
		}
		if ppid, _ := strconv.Atoi(rest[1]); ppid == me {
			n++
		}
	}
	return n
}
