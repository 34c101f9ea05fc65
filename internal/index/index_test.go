package index

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// countingIndexer fails, as the informer cache does, when a field is
// indexed twice.
type countingIndexer struct{ fields map[string]int }

func (c *countingIndexer) IndexField(_ context.Context, _ client.Object, field string, _ client.IndexerFunc) error {
	c.fields[field]++
	if c.fields[field] > 1 {
		return fmt.Errorf("indexer conflict: %s", field)
	}
	return nil
}

type fakeManager struct {
	ctrl.Manager
	indexer client.FieldIndexer
	cache   cache.Cache
}

func (m fakeManager) GetFieldIndexer() client.FieldIndexer { return m.indexer }
func (m fakeManager) GetCache() cache.Cache                { return m.cache }

func TestRegisterIsIdempotentPerManager(t *testing.T) {
	ctx := context.Background()
	one, two := &countingIndexer{fields: map[string]int{}}, &countingIndexer{fields: map[string]int{}}
	require.NoError(t, Register(ctx, fakeManager{indexer: one}, AddressByClaim, AddressByIP))
	require.NoError(t, Register(ctx, fakeManager{indexer: one}, AddressByClaim, AddressByClass), "a second controller of the same manager")
	require.NoError(t, Register(ctx, fakeManager{indexer: two}, AddressByClaim), "another manager")
	assert.Equal(t, map[string]int{AddressByClaim: 2, AddressByIP: 1, AddressByClass: 1}, one.fields, "asked again, refused, reused")
	assert.Equal(t, map[string]int{AddressByClaim: 1}, two.fields)

	failing := failingIndexer{err: errors.New("no informer for IPAddress")}
	assert.ErrorIs(t, Register(ctx, fakeManager{indexer: failing}, AddressByClaim), failing.err, "any other error is returned")
}

// failingIndexer fails every IndexField with err.
type failingIndexer struct{ err error }

func (f failingIndexer) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return f.err
}

// TestRegisterOnTheInformerCache: the manager's informer cache (no API
// server needed before it starts) refuses a field indexed twice with the
// error Register takes for the index being there, so a second controller
// of one manager registers the indexes it shares with the first.
func TestRegisterOnTheInformerCache(t *testing.T) {
	ctx := context.Background()
	c := unstartedCache(t)
	mgr := fakeManager{indexer: c, cache: c}

	require.NoError(t, Register(ctx, mgr, AddressByClaim, ServiceByIngressIP))
	require.NoError(t, Register(ctx, mgr, AddressByClaim, ServiceByIngressIP, AddressByClass), "a second controller of the same manager")
	err := c.IndexField(ctx, &iadv1alpha1.IPAddress{}, AddressByClass, indexFunc(t, AddressByClass))
	require.Error(t, err, "the cache refuses a field indexed twice")
	assert.True(t, Registered(err), "with the error Register expects: %v", err)
}

// unstartedCache is an informer cache that never reaches an API server:
// indexes can be registered on it and its informers' stores read.
func unstartedCache(t *testing.T) cache.Cache {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, iadv1alpha1.AddToScheme(scheme))
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(iadv1alpha1.GroupVersion.WithKind("IPAddress"), meta.RESTScopeRoot)
	mapper.Add(iadv1alpha1.GroupVersion.WithKind("IPAddressClaim"), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Service"), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Event"), meta.RESTScopeNamespace)
	c, err := cache.New(&rest.Config{Host: "http://127.0.0.1:1"}, cache.Options{Scheme: scheme, Mapper: mapper})
	require.NoError(t, err)
	return c
}

// storeIndexes are the index functions the store of obj's informer holds.
func storeIndexes(t *testing.T, c cache.Cache, obj client.Object) toolscache.Indexers {
	t.Helper()
	inf, err := c.GetInformer(context.Background(), obj)
	require.NoError(t, err)
	shared, ok := inf.(toolscache.SharedIndexInformer)
	require.True(t, ok, "%T", inf)
	return shared.GetIndexer().GetIndexers()
}

// TestOneKeyIndexes: an index with a Lookup keeps, of the two keys
// controller-runtime's IndexField keeps for a namespaced object, the one
// its lookups read, under the name the cache's List asks for. Each index
// is registered both ways on two caches and the keys compared, so an
// upgrade of controller-runtime that renames either fails here. Why one
// key: an index of a namespaced kind whose lookups all name the namespace
// (the placeholders'), or none does (a Service's ingress IP), needs only
// one, and each key is a set in the store: about 300 bytes saved for
// every value only one object has.
func TestOneKeyIndexes(t *testing.T) {
	ctx := context.Background()
	objects := map[string]client.Object{
		ServiceByIngressIP: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}}}},
		PlaceholderByAddress: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-iad-system", Name: "hold-ip-192-0-2-1",
			Labels: map[string]string{marks.LabelAddress: "ip-192-0-2-1"}}},
	}
	ours, theirs := unstartedCache(t), unstartedCache(t)
	for _, ix := range All {
		if ix.Lookup == EitherWay {
			continue
		}
		t.Run(ix.Field, func(t *testing.T) {
			require.NoError(t, Register(ctx, fakeManager{indexer: ours, cache: ours}, ix.Field))
			require.NoError(t, theirs.IndexField(ctx, ix.Object, ix.Field, ix.Func))
			one, ok := storeIndexes(t, ours, ix.Object)[indexPrefix+ix.Field]
			require.True(t, ok, "registered under the name the cache's List reads")
			both := storeIndexes(t, theirs, ix.Object)[indexPrefix+ix.Field]
			require.NotNil(t, both, "IndexField registers under the same name")

			obj, ok := objects[ix.Field]
			if !ok {
				return
			}
			got, err := one(obj)
			require.NoError(t, err)
			want, err := both(obj)
			require.NoError(t, err)
			require.Len(t, want, 2, "IndexField's two keys for a namespaced object")
			switch ix.Lookup {
			case InNamespace:
				assert.Equal(t, want[:1], got, "the key of the object's namespace")
				assert.Equal(t, []string{obj.GetNamespace() + "/" + ix.Func(obj)[0]}, got)
			case AcrossNamespaces:
				assert.Equal(t, want[1:], got, "the key for every namespace")
			}
		})
	}
}

// indexFunc returns the function of the named index.
func indexFunc(t *testing.T, field string) client.IndexerFunc {
	t.Helper()
	for _, ix := range All {
		if ix.Field == field {
			return ix.Func
		}
	}
	t.Fatalf("no index %s", field)
	return nil
}

func TestWarmIndexes(t *testing.T) {
	placeholder := func(role, class string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{marks.LabelPlaceholder: role},
			Annotations: map[string]string{marks.KeyClass: class},
		}}
	}
	byClass := indexFunc(t, WarmPlaceholderByClass)
	assert.Equal(t, []string{"gold"}, byClass(placeholder(names.PlaceholderWarm, "gold")), "a warm placeholder")
	assert.Nil(t, byClass(placeholder(names.PlaceholderHold, "gold")), "handed over: a hold now")
	assert.Nil(t, byClass(placeholder(names.PlaceholderAllocation, "gold")), "a claim's")
	assert.Nil(t, byClass(placeholder(names.PlaceholderWarm, "")), "no class")

	address := func(labels map[string]string) *iadv1alpha1.IPAddress {
		return &iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: iadv1alpha1.IPAddressSpec{ClassName: "gold"}}
	}
	warm := indexFunc(t, WarmAddressByClass)
	assert.Equal(t, []string{"gold"}, warm(address(map[string]string{marks.LabelWarm: "true"})), "recorded warm")
	assert.Nil(t, warm(address(nil)), "a claim's or an administrator's")
}

func TestAddressAttaching(t *testing.T) {
	attaching := indexFunc(t, AddressAttaching)
	a := &iadv1alpha1.IPAddress{}
	assert.Nil(t, attaching(a), "no attach grant")
	marks.GrantAttach(a, "shop", "web")
	assert.Equal(t, []string{Attaching}, attaching(a))
}

// TestClaimByClassNamesBoth: a claim is found under the class it names and
// the class the core resolved, once each.
func TestClaimByClassNamesBoth(t *testing.T) {
	var fn func(client.Object) []string
	for _, ix := range All {
		if ix.Field == ClaimByClass {
			fn = ix.Func
		}
	}
	require.NotNil(t, fn)
	claim := func(spec, status string) *iadv1alpha1.IPAddressClaim {
		return &iadv1alpha1.IPAddressClaim{Spec: iadv1alpha1.IPAddressClaimSpec{ClassName: spec}, Status: iadv1alpha1.IPAddressClaimStatus{ClassName: status}}
	}
	assert.Equal(t, []string{"gold"}, fn(claim("gold", "")), "named, not resolved yet")
	assert.Equal(t, []string{"gold"}, fn(claim("gold", "gold")))
	assert.Equal(t, []string{"silver"}, fn(claim("", "silver")), "the default class, resolved")
	assert.Equal(t, []string{"gold", "silver"}, fn(claim("gold", "silver")), "retargeted before binding")
	assert.Empty(t, fn(claim("", "")))
}
