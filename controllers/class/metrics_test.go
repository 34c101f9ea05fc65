package class

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
)

// series returns the values of a vector's series whose labels include
// want, keyed by their remaining labels; it never creates a series.
func series(vec *prometheus.GaugeVec, want map[string]string) map[string]float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { vec.Collect(ch); close(ch) }()
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			continue
		}
		match, rest := 0, ""
		for _, l := range d.GetLabel() {
			if v, ok := want[l.GetName()]; ok {
				if v == l.GetValue() {
					match++
				}
				continue
			}
			rest += l.GetName() + "=" + l.GetValue() + " "
		}
		if match == len(want) {
			out[rest] = d.GetGauge().GetValue()
		}
	}
	return out
}

func of(class string) map[string]string { return map[string]string{"class": class} }

func TestMetrics(t *testing.T) {
	const class = "metrics-unit"
	p := parsed(t, `{"addresses": ["192.0.2.0/24", "198.51.100.1-198.51.100.2", "2001:db8::/64"]}`)

	recordRendered(class, p)
	assert.Equal(t, map[string]float64{"": 1}, series(renderedClasses, of(class)))
	assert.Empty(t, series(refusedClasses, of(class)))
	assert.Equal(t, map[string]float64{"family=IPv4 ": 258, "family=IPv6 ": 18446744073709551616}, series(classAddresses, of(class)))

	recordRefused(class, ReasonOverlappingRanges, &p)
	assert.Empty(t, series(renderedClasses, of(class)))
	assert.Equal(t, map[string]float64{"reason=OverlappingRanges ": 1}, series(refusedClasses, of(class)))
	assert.Len(t, series(classAddresses, of(class)), 2, "the parsed ranges are still counted")

	recordRefused(class, ReasonInvalidParameters, nil)
	assert.Equal(t, map[string]float64{"reason=InvalidParameters ": 1}, series(refusedClasses, of(class)), "one reason at a time")
	assert.Empty(t, series(classAddresses, of(class)))

	recordRendered(class, p)
	assert.Empty(t, series(refusedClasses, of(class)))
	forget(class)
	assert.Empty(t, series(renderedClasses, of(class)))
	assert.Empty(t, series(refusedClasses, of(class)))
	assert.Empty(t, series(classAddresses, of(class)))
}
