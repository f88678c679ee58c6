package harness

import (
	"slices"
	"testing"
	"time"
)

// Percentile is the p-th percentile (0-100) of sorted durations.
func Percentile(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// ReportPercentiles reports the p50 and p99 of durations in microseconds,
// as <prefix>p50-µs and <prefix>p99-µs: benchmarks of single operations
// report percentiles of every measured operation, since b.N averages hide
// the tail.
func ReportPercentiles(b *testing.B, prefix string, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	b.ReportMetric(float64(Percentile(took, 50).Microseconds()), prefix+"p50-µs")
	b.ReportMetric(float64(Percentile(took, 99).Microseconds()), prefix+"p99-µs")
}
