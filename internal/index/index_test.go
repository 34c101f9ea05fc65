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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
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
}

func (m fakeManager) GetFieldIndexer() client.FieldIndexer { return m.indexer }

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
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, iadv1alpha1.AddToScheme(scheme))
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(iadv1alpha1.GroupVersion.WithKind("IPAddress"), meta.RESTScopeRoot)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Service"), meta.RESTScopeNamespace)
	c, err := cache.New(&rest.Config{Host: "http://127.0.0.1:1"}, cache.Options{Scheme: scheme, Mapper: mapper})
	require.NoError(t, err)
	mgr := fakeManager{indexer: c}

	require.NoError(t, Register(ctx, mgr, AddressByClaim, ServiceByIngressIP))
	require.NoError(t, Register(ctx, mgr, AddressByClaim, ServiceByIngressIP, AddressByClass), "a second controller of the same manager")
	err = c.IndexField(ctx, &iadv1alpha1.IPAddress{}, AddressByClass, indexFunc(t, AddressByClass))
	require.Error(t, err, "the cache refuses a field indexed twice")
	assert.True(t, Registered(err), "with the error Register expects: %v", err)
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
			Labels:      map[string]string{names.LabelPlaceholder: role},
			Annotations: map[string]string{names.AnnotationClass: class},
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
	assert.Equal(t, []string{"gold"}, warm(address(map[string]string{names.LabelWarm: "true"})), "recorded warm")
	assert.Nil(t, warm(address(nil)), "a claim's or an administrator's")
}

func TestAddressAttaching(t *testing.T) {
	attaching := indexFunc(t, AddressAttaching)
	a := &iadv1alpha1.IPAddress{}
	assert.Nil(t, attaching(a), "no attach grant")
	names.GrantAttach(a, "shop", "web")
	assert.Equal(t, []string{Attaching}, attaching(a))
}
