package bootstrap

import (
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// uncompressedMetrics is the metrics server's filter: it serves /metrics
// without gzip. The Prometheus handler compresses whenever the scraper
// accepts gzip, and each compression takes a gzip writer of about 1.8 MB
// from a pool that keeps it between scrapes: after a burst of 1,000
// claims it was the largest single item of the claim controller's heap
// (BENCHMARKS.md), to save a few hundred kilobytes of in-cluster traffic
// per scrape.
func uncompressedMetrics(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(_ logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Del("Accept-Encoding")
			next.ServeHTTP(w, r)
		}), nil
	}, nil
}
