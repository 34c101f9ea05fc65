package service

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

func addressNamed(name string) *iadv1alpha1.IPAddress {
	return &iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     iadv1alpha1.IPAddressStatus{Phase: iadv1alpha1.AddressBound},
	}
}

// statusAPI is a fake API server holding the addresses, with the status
// subresource; writes counts its status patches by address.
func statusAPI(t *testing.T, addrs ...*iadv1alpha1.IPAddress) (client.Client, map[string]int) {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, iadv1alpha1.AddToScheme(scheme))
	writes := map[string]int{}
	objs := make([]client.Object, 0, len(addrs))
	for _, a := range addrs {
		objs = append(objs, a)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&iadv1alpha1.IPAddress{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				writes[obj.GetName()]++
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
		}).Build()
	return c, writes
}

// read returns a fresh read of the address, as a pass's list would.
func read(t *testing.T, c client.Client, name string) *iadv1alpha1.IPAddress {
	t.Helper()
	a := &iadv1alpha1.IPAddress{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: name}, a))
	return a
}

func associate(name string) func(*iadv1alpha1.IPAddressStatus) {
	return func(st *iadv1alpha1.IPAddressStatus) {
		st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "shop", Name: name}
	}
}

func inConflict(st *iadv1alpha1.IPAddressStatus) { st.Phase = iadv1alpha1.AddressConflict }

func TestStatusWriterDue(t *testing.T) {
	var w statusWriter
	b, a, same := addressNamed("ip-b"), addressNamed("ip-a"), addressNamed("ip-c")
	w.set(b, associate("web"), nil)
	w.set(a, inConflict, nil)
	w.set(same, func(st *iadv1alpha1.IPAddressStatus) { st.Phase = iadv1alpha1.AddressBound }, nil)
	var names []string
	for _, c := range w.due() {
		names = append(names, c.addr.Name)
	}
	assert.Equal(t, []string{"ip-a", "ip-b"}, names, "in name order, and only what changes")

	// Another copy of ip-a (another list of the pass): one change, on both.
	other := addressNamed("ip-a")
	w.set(other, associate("web"), nil)
	assert.Len(t, w.due(), 2)
	assert.Same(t, a, w.pending["ip-a"].addr, "the copy set first is the one written")
	assert.Equal(t, iadv1alpha1.AddressConflict, a.Status.Phase)
	assert.Equal(t, "web", a.Status.AssociatedTo.Name, "the later change reaches the written copy")
	assert.Equal(t, "web", other.Status.AssociatedTo.Name, "and the caller reads what it set")
}

// TestStatusWriterWritesEachAddressOnce: a pass's changes to one address,
// from two phases and two copies, are one locked patch; what ran once
// written runs in order; a second write of the address in the pass is
// refused.
func TestStatusWriterWritesEachAddressOnce(t *testing.T) {
	ctx := context.Background()
	c, writes := statusAPI(t, addressNamed("ip-a"), addressNamed("ip-b"))
	var w statusWriter
	var told []string
	conflicting, listed := read(t, c, "ip-a"), read(t, c, "ip-a")
	w.set(conflicting, inConflict, func() { told = append(told, "conflict") })
	w.set(listed, associate("web"), func() { told = append(told, "associated") })
	w.set(read(t, c, "ip-b"), associate("web"), func() { told = append(told, "b") })
	w.set(read(t, c, "ip-b"), associate("web"), nil)

	require.NoError(t, w.flush(ctx, c))
	assert.Equal(t, map[string]int{"ip-a": 1, "ip-b": 1}, writes, "one status patch per address")
	assert.Equal(t, []string{"conflict", "associated", "b"}, told)
	got := read(t, c, "ip-a")
	assert.Equal(t, iadv1alpha1.AddressConflict, got.Status.Phase)
	assert.Equal(t, "web", got.Status.AssociatedTo.Name)

	require.NoError(t, w.flush(ctx, c), "nothing pending, nothing written")
	assert.Equal(t, map[string]int{"ip-a": 1, "ip-b": 1}, writes)

	w.set(got, associate("other"), nil)
	require.Error(t, w.flush(ctx, c), "a second write of an address in one pass")
	assert.Equal(t, 1, writes["ip-a"])
}

// TestStatusWriterOnError: a write resting on a stale read conflicts and
// drops what the flush did not write; an address gone is passed over.
func TestStatusWriterOnError(t *testing.T) {
	ctx := context.Background()
	c, writes := statusAPI(t, addressNamed("ip-a"), addressNamed("ip-b"))
	var w statusWriter
	stale := read(t, c, "ip-a")
	fresh := read(t, c, "ip-a")
	fresh.Status.Phase = iadv1alpha1.AddressReleased
	require.NoError(t, c.Status().Update(ctx, fresh))
	told := false
	w.set(stale, associate("web"), func() { told = true })
	w.set(read(t, c, "ip-b"), associate("web"), nil)
	err := w.flush(ctx, c)
	assert.True(t, apierrors.IsConflict(err), "locked to the version read: %v", err)
	assert.False(t, told)
	assert.Equal(t, 0, writes["ip-b"], "the flush stops at the conflict")
	assert.Empty(t, w.due(), "and drops what it did not write")

	var w2 statusWriter
	gone := addressNamed("ip-gone")
	gone.ResourceVersion = "1"
	w2.set(gone, associate("web"), func() { told = true })
	w2.set(read(t, c, "ip-b"), associate("web"), nil)
	err = w2.flush(ctx, c)
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	assert.False(t, told)
	assert.Equal(t, 1, writes["ip-b"], "an address gone is passed over")
	assert.Equal(t, "web", read(t, c, "ip-b").Status.AssociatedTo.Name)
}
