package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	chartrender "github.com/cozystack/metallb-iad/test/chart"
)

// metricsReader is the chart's ClusterRole that may GET /metrics, for the
// release metallb-iad.
const metricsReader = "metallb-iad-metrics-reader"

// scrapers are two tokens for the kit's namespace: one of a ServiceAccount
// bound to metricsReader, one of a ServiceAccount without it.
type scrapers struct{ reader, stranger string }

// newScrapers creates the two ServiceAccounts, binds the reader, and asks
// the API server for their tokens.
func newScrapers(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) scrapers {
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	require.NoError(t, err)
	token := func(name string) string {
		k.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: name}})
		tr, err := cs.CoreV1().ServiceAccounts(k.ns).CreateToken(ctx, name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return tr.Status.Token
	}
	k.create(&rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-scraper-" + k.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: k.ns, Name: "scraper"}},
	})
	return scrapers{reader: token("scraper"), stranger: token("stranger")}
}

// scrapeClient speaks HTTPS to a controller's self-signed certificate, a
// new connection per request (kube-proxy picks a replica per connection).
var scrapeClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}

// scrape GETs url with token as its bearer token (none when empty).
func scrape(ctx context.Context, t require.TestingT, url, token string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := scrapeClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// assertMetricsGuarded: an anonymous scrape of url gets 401, an unknown
// token 401, a token without the role 403.
func assertMetricsGuarded(ctx context.Context, t *testing.T, url string, s scrapers) {
	code, _ := scrape(ctx, t, url, "")
	assert.Equal(t, http.StatusUnauthorized, code, "an anonymous scrape of %s", url)
	code, _ = scrape(ctx, t, url, "not-a-token")
	assert.Equal(t, http.StatusUnauthorized, code, "a token the API server does not know")
	code, body := scrape(ctx, t, url, s.stranger)
	assert.Equal(t, http.StatusForbidden, code, "a token without the metrics-reader role: %s", body)
}

// TestMetricsNeedAToken: the feature `metrics`. A controller serving its
// metrics as the chart runs it (--metrics-secure, the default) answers
// an anonymous scrape 401, a token the API server authenticates but RBAC
// does not allow 403, and a token bound to the chart's metrics-reader
// ClusterRole its metrics. (On the chart's providers TestMetricsService
// scrapes the pods the same way.)
func TestMetricsNeedAToken(t *testing.T) {
	story(t, "metrics", "the metrics endpoint refuses a scrape the API server does not authorize", "metrics-token", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		if local == nil {
			t.Skip("TestMetricsService scrapes the chart's pods; the local provider runs the binaries here")
		}
		// A standby replica serves metrics like the leader: this one as
		// the chart runs it.
		d, err := local.StartReplica(ctx, "class", "--metrics-secure=true")
		require.NoError(t, err)
		t.Cleanup(func() { d.Stop(10 * time.Second) })

		r, err := chartrender.Render(chartrender.Release{}, "")
		require.NoError(t, err)
		reader := r.Get("ClusterRole", metricsReader)
		require.NotNil(t, reader, "the chart renders the metrics-reader ClusterRole")
		require.NoError(t, k.k.Create(ctx, reader))
		t.Cleanup(func() { _ = k.k.Delete(context.Background(), reader) })
		s := newScrapers(ctx, t, cfg, k)

		url := "https://" + d.MetricsAddr + "/metrics"
		assertMetricsGuarded(ctx, t, url, s)
		// The binding reaches the authorizer a moment after it is created.
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			code, body := scrape(ctx, ct, url, s.reader)
			require.Equal(ct, http.StatusOK, code, body)
			assert.Contains(ct, body, "leader_election_master_status")
		}, time.Minute, time.Second)

		// Plain HTTP is not served on the secure port.
		if plain, err := scrapeClient.Get("http://" + d.MetricsAddr + "/metrics"); err == nil {
			defer plain.Body.Close()
			assert.NotEqual(t, http.StatusOK, plain.StatusCode)
		}
	})
}
