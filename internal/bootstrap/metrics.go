package bootstrap

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsFilter is what stands before /metrics: with secure, the caller's
// bearer token is authenticated (TokenReview) and authorized for GET
// /metrics (SubjectAccessReview) by the API server, so an anonymous scrape
// gets 401 and an unauthorized one 403; either way the scrape is served
// uncompressed (uncompressedMetrics). The reviews are the kubebuilder
// way's, written here on client-go's typed clients: controller-runtime's
// filter package would add k8s.io/apiserver to every binary, 20 MB of it.
func metricsFilter(secure bool) func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	if !secure {
		return uncompressedMetrics
	}
	return func(c *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
		authn, err := authenticationclient.NewForConfigAndClient(c, hc)
		if err != nil {
			return nil, err
		}
		authz, err := authorizationclient.NewForConfigAndClient(c, hc)
		if err != nil {
			return nil, err
		}
		g := &metricsGuard{tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews(), seen: map[[32]byte]verdict{}}
		plain, _ := uncompressedMetrics(c, hc)
		return func(log logr.Logger, next http.Handler) (http.Handler, error) {
			h, err := plain(log, next)
			if err != nil {
				return nil, err
			}
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if code, why := g.admit(r, log); code != http.StatusOK {
					http.Error(w, why, code)
					return
				}
				h.ServeHTTP(w, r)
			}), nil
		}, nil
	}
}

// metricsGuard asks the API server about each scraper's token, and keeps
// its answer for verdictTTL so a scrape every few seconds costs no review.
type metricsGuard struct {
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface

	mu   sync.Mutex
	seen map[[32]byte]verdict
}

// verdict is the status code a token earned, until expires.
type verdict struct {
	code    int
	why     string
	expires time.Time
}

const (
	verdictTTL = 10 * time.Second
	// maxVerdicts bounds the memory a caller sending many tokens can take.
	maxVerdicts = 64
)

// admit returns http.StatusOK for a request whose bearer token the API
// server authenticates and authorizes for the request's path and verb,
// else the status to answer with and why.
func (g *metricsGuard) admit(r *http.Request, log logr.Logger) (int, string) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return http.StatusUnauthorized, "Unauthorized: a bearer token is required"
	}
	key := sha256.Sum256([]byte(r.Method + " " + r.URL.Path + " " + token))
	now := time.Now()
	g.mu.Lock()
	v, ok := g.seen[key]
	g.mu.Unlock()
	if ok && now.Before(v.expires) {
		return v.code, v.why
	}
	v = g.review(r, strings.TrimSpace(token), log)
	if v.code == http.StatusInternalServerError {
		return v.code, v.why // asked again next time
	}
	v.expires = now.Add(verdictTTL)
	g.mu.Lock()
	if len(g.seen) >= maxVerdicts {
		clear(g.seen)
	}
	g.seen[key] = v
	g.mu.Unlock()
	return v.code, v.why
}

// review asks the API server who the token is and whether it may GET the
// path. An error asking is a 500 and not kept.
func (g *metricsGuard) review(r *http.Request, token string, log logr.Logger) verdict {
	ctx := r.Context()
	tr, err := g.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		log.Error(err, "metrics: TokenReview failed")
		return verdict{code: http.StatusInternalServerError, why: "authentication failed"}
	}
	if !tr.Status.Authenticated {
		return verdict{code: http.StatusUnauthorized, why: "Unauthorized"}
	}
	u := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := g.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: r.URL.Path, Verb: strings.ToLower(r.Method)},
	}}, metav1.CreateOptions{})
	if err != nil {
		log.Error(err, "metrics: SubjectAccessReview failed")
		return verdict{code: http.StatusInternalServerError, why: "authorization failed"}
	}
	if !sar.Status.Allowed {
		return verdict{code: http.StatusForbidden, why: "Forbidden: " + u.Username + " may not " + strings.ToLower(r.Method) + " " + r.URL.Path}
	}
	return verdict{code: http.StatusOK}
}

// uncompressedMetrics serves /metrics without gzip: each compressed scrape
// pools a 1.8 MB writer, the largest item of the claim controller's heap
// after 1,000 claims (BENCHMARKS.md), to save little in-cluster traffic.
func uncompressedMetrics(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(_ logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Del("Accept-Encoding")
			next.ServeHTTP(w, r)
		}), nil
	}, nil
}
