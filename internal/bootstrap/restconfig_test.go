package bootstrap

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

func TestRESTConfigAsksForUncompressedResponses(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	// Over TLS, as to any API server: client-go gives a plain-HTTP config
	// Go's default transport, which ignores the setting.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"x"}}`))
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`", insecure-skip-tls-verify: true}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`), 0o600))

	get := func(cfg *rest.Config) string {
		cs, err := corev1client.NewForConfig(cfg)
		require.NoError(t, err)
		_, err = cs.Namespaces().Get(context.Background(), "x", metav1.GetOptions{})
		require.NoError(t, err)
		mu.Lock()
		defer mu.Unlock()
		return asked[len(asked)-1]
	}
	cfg, err := (&Options{Kubeconfig: kubeconfig}).RESTConfig()
	require.NoError(t, err)
	assert.NotContains(t, get(cfg), "gzip", "the driver's requests ask for uncompressed responses")

	// The same client with compression allowed asks for gzip.
	compressed := rest.CopyConfig(cfg)
	compressed.DisableCompression = false
	assert.Contains(t, get(compressed), "gzip")
}
