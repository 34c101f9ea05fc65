package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Summary describes a set of latencies.
type Summary struct {
	// N is how many latencies were summarized.
	N int
	// Min, P50, P95 and Max are nearest-rank percentiles (0, 50, 95, 100).
	Min, P50, P95, Max time.Duration
	// Mean is the arithmetic mean.
	Mean time.Duration
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, or 0 when sorted is empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Summarize computes the percentiles of ds (which it does not modify).
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{
		N:    len(s),
		Min:  s[0],
		P50:  Percentile(s, 50),
		P95:  Percentile(s, 95),
		Max:  s[len(s)-1],
		Mean: sum / time.Duration(len(s)),
	}
}

// Ms is d in milliseconds, for b.ReportMetric.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Ratio is a/b, or NaN when b is zero.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// MiB formats a byte count in mebibytes.
func MiB(bytes float64) string { return fmt.Sprintf("%.1f MiB", bytes/(1<<20)) }

// KiB formats a byte count in kibibytes, keeping the sign.
func KiB(bytes float64) string { return fmt.Sprintf("%+.1f KiB", bytes/(1<<10)) }
