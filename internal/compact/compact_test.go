package compact

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// decoded is a key as a decoder makes it: its own bytes.
func decoded(s string) string { return strings.Clone(s) }

func TestObject(t *testing.T) {
	mk := func() *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{
			Name:          "web",
			Labels:        map[string]string{decoded("example.com/role"): "web"},
			Annotations:   map[string]string{decoded("example.com/note"): "a"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		}}
	}
	a, b := mk(), mk()
	labels := a.Labels
	for _, o := range []*corev1.Service{a, b} {
		got, err := Object(o)
		require.NoError(t, err)
		assert.Same(t, o, got)
	}
	assert.Nil(t, a.ManagedFields)
	assert.Equal(t, map[string]string{"example.com/role": "web"}, a.Labels)
	assert.Equal(t, map[string]string{"example.com/note": "a"}, b.Annotations)
	keyOf := func(m map[string]string) string {
		for k := range m {
			return k
		}
		return ""
	}
	assert.Equal(t, unsafe.StringData(keyOf(a.Labels)), unsafe.StringData(keyOf(b.Labels)), "one copy of a key for every object")
	assert.Equal(t, unsafe.StringData(keyOf(a.Annotations)), unsafe.StringData(keyOf(b.Annotations)))
	labels["changed"] = "x"
	assert.NotContains(t, a.Labels, "changed", "the decoded map is not the one kept")

	var none corev1.Service
	_, err := Object(&none)
	require.NoError(t, err)
	assert.Nil(t, none.Labels, "no labels stay none")
	got, err := Object("not an object")
	require.NoError(t, err)
	assert.Equal(t, "not an object", got)
}

func TestKeysBounded(t *testing.T) {
	keys.Lock()
	saved := keys.m
	keys.m = map[string]string{}
	for i := range maxKeys {
		keys.m[strings.Repeat("k", i+1)] = strings.Repeat("k", i+1)
	}
	keys.Unlock()
	defer func() {
		keys.Lock()
		keys.m = saved
		keys.Unlock()
	}()
	k := decoded("example.com/new")
	got := Keys(map[string]string{k: "v"})
	assert.Equal(t, map[string]string{"example.com/new": "v"}, got)
	keys.RLock()
	assert.Len(t, keys.m, maxKeys, "a full table takes no new key")
	keys.RUnlock()
}
