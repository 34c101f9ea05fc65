package bootstrap

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
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

// TestMetricsGuard: the guard's decisions, with the API server's answers
// stubbed (the real reviews run in test/e2e TestMetricsNeedAToken).
func TestMetricsGuard(t *testing.T) {
	reviews := 0
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		reviews++
		tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if tr.Spec.Token == "boom" {
			return true, nil, errors.New("API server unreachable")
		}
		tr.Status.Authenticated = tr.Spec.Token != "unknown"
		tr.Status.User = authenticationv1.UserInfo{Username: tr.Spec.Token}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		sar.Status.Allowed = sar.Spec.User == "reader" && sar.Spec.NonResourceAttributes.Path == "/metrics" &&
			sar.Spec.NonResourceAttributes.Verb == "get"
		return true, sar, nil
	})
	g := &metricsGuard{tokens: cs.AuthenticationV1().TokenReviews(), access: cs.AuthorizationV1().SubjectAccessReviews(), seen: map[[32]byte]verdict{}}
	req := func(header string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		return r
	}
	for _, tt := range []struct {
		name, header string
		want         int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"not a bearer token", "Basic cmVhZGVyOng=", http.StatusUnauthorized},
		{"an empty bearer token", "Bearer  ", http.StatusUnauthorized},
		{"a token the API server does not know", "Bearer unknown", http.StatusUnauthorized},
		{"a user without the role", "Bearer stranger", http.StatusForbidden},
		{"a reader", "Bearer reader", http.StatusOK},
		{"the API server unreachable", "Bearer boom", http.StatusInternalServerError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, why := g.admit(req(tt.header), logr.Discard())
			assert.Equal(t, tt.want, code, why)
		})
	}

	// A verdict is kept: the reader scraping again costs no review; an
	// error is not kept.
	before := reviews
	code, _ := g.admit(req("Bearer reader"), logr.Discard())
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, before, reviews, "a kept verdict asks the API server nothing")
	g.admit(req("Bearer boom"), logr.Discard())
	assert.Equal(t, before+1, reviews, "an error is asked again")

	// The memory a caller sending many tokens takes is bounded.
	for i := range 3 * maxVerdicts {
		g.admit(req(fmt.Sprintf("Bearer stranger-%d", i)), logr.Discard())
	}
	assert.LessOrEqual(t, len(g.seen), maxVerdicts)
}
