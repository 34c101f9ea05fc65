package bootstrap

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper knows the kinds added to it and counts the questions.
type countingMapper struct {
	*meta.DefaultRESTMapper
	asked int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.asked++
	return c.DefaultRESTMapper.RESTMapping(gk, versions...)
}

func TestRememberingMapper(t *testing.T) {
	v1 := schema.GroupVersion{Group: "local.sdn.cozystack.io", Version: "v1alpha1"}
	under := &countingMapper{DefaultRESTMapper: meta.NewDefaultRESTMapper([]schema.GroupVersion{v1})}
	under.Add(v1.WithKind("IPAddress"), meta.RESTScopeRoot)
	m := &rememberingMapper{RESTMapper: under}

	address := schema.GroupKind{Group: v1.Group, Kind: "IPAddress"}
	for range 3 {
		got, err := m.RESTMapping(address, "v1alpha1")
		require.NoError(t, err)
		assert.Equal(t, meta.RESTScopeNameRoot, got.Scope.Name())
		assert.Equal(t, "ipaddresses", got.Resource.Resource)
	}
	assert.Equal(t, 1, under.asked, "a found kind is asked once")

	claim := schema.GroupKind{Group: v1.Group, Kind: "IPAddressClaim"}
	for range 2 {
		_, err := m.RESTMapping(claim, "v1alpha1")
		assert.True(t, meta.IsNoMatchError(err), "an unknown kind is the mapper's error: %v", err)
	}
	assert.Equal(t, 3, under.asked, "an unknown kind is asked again each time")
	under.Add(v1.WithKind("IPAddressClaim"), meta.RESTScopeNamespace)
	got, err := m.RESTMapping(claim, "v1alpha1")
	require.NoError(t, err, "a kind installed later is found")
	assert.Equal(t, meta.RESTScopeNameNamespace, got.Scope.Name())

	_, err = m.RESTMapping(address)
	require.NoError(t, err)
	_, err = m.RESTMapping(address)
	require.NoError(t, err)
	assert.Equal(t, 6, under.asked, "a question without one version is not remembered")
}
