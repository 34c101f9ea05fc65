package bootstrap

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetricsServedUncompressed(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "probe_total", Help: "A probe."}))
	handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})

	get := func(h http.Handler) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	// Without the filter, the handler compresses for a scraper that accepts gzip.
	assert.Equal(t, "gzip", get(handler).Header().Get("Content-Encoding"))

	filter, err := uncompressedMetrics(nil, nil)
	require.NoError(t, err)
	filtered, err := filter(logr.Discard(), handler)
	require.NoError(t, err)
	rec := get(filtered)
	assert.Empty(t, rec.Header().Get("Content-Encoding"))
	assert.Contains(t, rec.Body.String(), "probe_total 0")
}
