package bootstrap

import (
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// rememberingMapper answers a kind's mapping at one version from memory
// once the mapper under it has found it. The cache asks for the mapping on
// every Get and List of a kind cached per namespace (is it namespaced?),
// and controller-runtime's mapper builds a new answer each time, under its
// lock: 5 % of the claim controller's CPU in a claim burst. A kind the
// mapper under it does not know yet is asked again each time, so a CRD
// installed later is still found; a kind once found keeps its mapping, as
// it does in the mapper under it.
type rememberingMapper struct {
	meta.RESTMapper
	found sync.Map // schema.GroupVersionKind -> *meta.RESTMapping
}

// newRememberingMapper is a manager's MapperProvider: controller-runtime's
// dynamic mapper, remembered.
func newRememberingMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &rememberingMapper{RESTMapper: m}, nil
}

// RESTMapping remembers the answers for one named version; other questions
// go to the mapper under it.
func (m *rememberingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) != 1 {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	gvk := gk.WithVersion(versions[0])
	if found, ok := m.found.Load(gvk); ok {
		return found.(*meta.RESTMapping), nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.found.Store(gvk, mapping)
	return mapping, nil
}
