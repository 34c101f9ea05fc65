package cluster

import (
	"context"
	"os"
	"strings"
	"time"
)

// MetalLBFullPassLog marks, in MetalLB's info log (go-kit JSON), the lines
// of its passes over every Service; with "start reconcile", one starting.
const MetalLBFullPassLog = `"controller":"ServiceReconciler - reprocessAll"`

// MetalLBFullPasses counts the passes over every Service that the running
// MetalLB controller has started, from its log. It needs MetalLBLogLevel
// "info" (MetalLB logs nothing of its passes below that).
func (c *Cluster) MetalLBFullPasses() (int, error) {
	b, err := os.ReadFile(c.metallb.LogPath)
	if err != nil {
		return 0, err
	}
	return CountFullPasses(string(b)), nil
}

// CountFullPasses counts the full passes started in a MetalLB log.
func CountFullPasses(log string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, MetalLBFullPassLog) && strings.Contains(line, `"start reconcile"`) {
			n++
		}
	}
	return n
}

// WaitMetalLBQuiet waits until the MetalLB controller's log has not grown
// for quiet: at "info" it logs every reconcile, so it has nothing left to do.
func (c *Cluster) WaitMetalLBQuiet(ctx context.Context, quiet time.Duration) error {
	last, since := int64(-1), time.Now()
	for {
		fi, err := os.Stat(c.metallb.LogPath)
		if err != nil {
			return err
		}
		switch {
		case fi.Size() != last:
			last, since = fi.Size(), time.Now()
		case time.Since(since) >= quiet:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
