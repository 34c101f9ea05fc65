package patch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func service(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"a": "1"}}}
}

func conflict() error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "s", errors.New("changed"))
}

// twoReads returns a client holding Service ns/s and two reads of it.
func twoReads(t *testing.T) (client.Client, *corev1.Service, *corev1.Service) {
	c := fake.NewClientBuilder().WithObjects(service("s")).Build()
	var stale, fresh corev1.Service
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "s"}, &stale))
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "s"}, &fresh))
	return c, &stale, &fresh
}

func TestMetaWritesTheChangeWithALock(t *testing.T) {
	ctx := context.Background()
	c, stale, fresh := twoReads(t)

	require.NoError(t, Meta(ctx, c, fresh, func() { fresh.Labels["b"] = "2" }))
	var got corev1.Service
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(fresh), &got))
	assert.Equal(t, map[string]string{"a": "1", "b": "2"}, got.Labels)

	err := Meta(ctx, c, stale, func() { stale.Labels["c"] = "3" })
	assert.True(t, apierrors.IsConflict(err), "a write resting on a stale read conflicts: %v", err)
}

func TestUnlockedIgnoresAStaleRead(t *testing.T) {
	ctx := context.Background()
	c, stale, fresh := twoReads(t)
	require.NoError(t, Meta(ctx, c, fresh, func() { fresh.Labels["b"] = "2" }))
	require.NoError(t, Unlocked(ctx, c, stale, func() { stale.Labels["c"] = "3" }))
	var got corev1.Service
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(fresh), &got))
	assert.Equal(t, map[string]string{"a": "1", "b": "2", "c": "3"}, got.Labels)
}

func TestStatusWritesTheStatus(t *testing.T) {
	ctx := context.Background()
	s := service("s")
	c := fake.NewClientBuilder().WithObjects(s).WithStatusSubresource(s).Build()
	var svc corev1.Service
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(s), &svc))
	require.NoError(t, Status(ctx, c, &svc, func() {
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	}))
	var got corev1.Service
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(s), &got))
	assert.Equal(t, "192.0.2.1", got.Status.LoadBalancer.Ingress[0].IP)
}

func TestFinalizers(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(service("s")).Build()
	var svc corev1.Service
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "s"}, &svc))

	require.NoError(t, AddFinalizer(ctx, c, &svc, "x/f"))
	require.NoError(t, AddFinalizer(ctx, c, &svc, "x/f"), "adding it again writes nothing")
	var got corev1.Service
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&svc), &got))
	assert.Equal(t, []string{"x/f"}, got.Finalizers)

	removed, err := RemoveFinalizer(ctx, c, &svc, "x/f")
	require.NoError(t, err)
	assert.True(t, removed)
	removed, err = RemoveFinalizer(ctx, c, &svc, "x/f")
	require.NoError(t, err)
	assert.False(t, removed, "nothing to remove")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&svc), &got))
	assert.Empty(t, got.Finalizers)
}

func TestSooner(t *testing.T) {
	none, one, two := ctrl.Result{}, ctrl.Result{RequeueAfter: time.Second}, ctrl.Result{RequeueAfter: 2 * time.Second}
	assert.Equal(t, one, Sooner(two, one))
	assert.Equal(t, one, Sooner(one, two))
	assert.Equal(t, one, Sooner(none, one))
	assert.Equal(t, one, Sooner(one, none))
	assert.Equal(t, none, Sooner(none, none))
}

// staleReader shows nothing until it has been asked n times.
type staleReader struct {
	client.Reader
	n int
}

func (r *staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if r.n > 0 {
		r.n--
		return apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, key.Name)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func TestWaitForCache(t *testing.T) {
	ctx := context.Background()
	s := service("s")
	c := fake.NewClientBuilder().WithObjects(s).Build()

	require.NoError(t, WaitForCache(ctx, &staleReader{Reader: c, n: 3}, c, s, nil, 5*time.Second), "the cache catches up")

	err := WaitForCache(ctx, c, c, s, func(o client.Object) bool { return o.GetLabels()["b"] == "2" }, 100*time.Millisecond)
	assert.Error(t, err, "seen never accepts it")

	gone := service("gone")
	assert.NoError(t, WaitForCache(ctx, c, c, gone, nil, 5*time.Second), "gone from the API server too: nothing to wait for")
	assert.Error(t, WaitForCache(ctx, c, nil, gone, nil, 100*time.Millisecond), "without a live reader it waits until the timeout")
	assert.Equal(t, map[string]string{"a": "1"}, s.Labels, "obj itself is not changed")
}

func TestWritten(t *testing.T) {
	var w Written
	assert.False(t, w.Behind("a", "10"), "nothing written")

	w.Wrote("a", "10")
	assert.True(t, w.Behind("a", "10"), "the cache still shows the version the write was locked to")
	assert.True(t, w.Behind("a", "10"), "and keeps saying so until the cache moves on")
	assert.False(t, w.Behind("b", "10"), "per object")

	assert.False(t, w.Behind("a", "11"), "the cache shows the write")
	assert.False(t, w.Behind("a", "10"), "the record is dropped once the cache moved on")

	w.Wrote("a", "13")
	w.Forget("a")
	assert.False(t, w.Behind("a", "13"), "forgotten")

	// A record nobody read again (its object was deleted) does not stay.
	w.m.Store("old", writtenAt{basedOn: "7", at: time.Now().Add(-writtenMaxAge - time.Second)})
	assert.False(t, w.Behind("old", "7"), "a record past its age is not waited on")
	w.m.Store("old", writtenAt{basedOn: "7", at: time.Now().Add(-writtenMaxAge - time.Second)})
	w.lastSweep = time.Time{}
	w.Wrote("b", "1")
	_, kept := w.m.Load("old")
	assert.False(t, kept, "swept by a later write")
	assert.True(t, w.Behind("b", "1"))
}
