package core

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// TestSafetyNetTrustsTheCache: the address reconciler asks only its cache
// whether a pre-bound address's claim exists, as the real core does. An
// address pre-bound (with a uid) to a claim the cache does not hold is
// reclaimed at once: deleted under Delete, Released under Retain. The
// client here stands for that cache.
func TestSafetyNetTrustsTheCache(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, iadv1alpha1.AddToScheme(scheme))
	for _, policy := range []iadv1alpha1.ReclaimPolicy{iadv1alpha1.ReclaimDelete, iadv1alpha1.ReclaimRetain} {
		t.Run(string(policy), func(t *testing.T) {
			a := &iadv1alpha1.IPAddress{
				ObjectMeta: metav1.ObjectMeta{Name: "ip-192-0-2-1", Finalizers: []string{iadv1alpha1.AddressProtectionFinalizer}},
				Spec: iadv1alpha1.IPAddressSpec{Address: "192.0.2.1", ClassName: "x", ReclaimPolicy: policy,
					ClaimRef: &iadv1alpha1.ClaimReference{Namespace: "ns", Name: "not-seen-yet", UID: "u1"}},
				Status: iadv1alpha1.IPAddressStatus{Phase: iadv1alpha1.AddressBound},
			}
			cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(a).WithStatusSubresource(a).Build()
			r := &addressReconciler{Client: cache}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(a)})
			require.NoError(t, err)
			got := &iadv1alpha1.IPAddress{}
			err = cache.Get(context.Background(), client.ObjectKeyFromObject(a), got)
			if policy == iadv1alpha1.ReclaimDelete {
				// The fake keeps an object with finalizers, marked for deletion.
				require.True(t, err == nil || apierrors.IsNotFound(err), "%v", err)
				if err == nil {
					assert.NotNil(t, got.DeletionTimestamp, "deleted at once")
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, iadv1alpha1.AddressReleased, got.Status.Phase, "released at once")
		})
	}
}

// TestConflictsBackOff: a lost optimistic-concurrency race is returned as an
// error, so the workqueue's exponential backoff decides when the pass runs
// again, as in the real core; only an object that vanished is retried at
// once.
func TestConflictsBackOff(t *testing.T) {
	conflict := apierrors.NewConflict(iadv1alpha1.GroupVersion.WithResource("ipaddresses").GroupResource(), "a", assert.AnError)
	res, err := quiet(conflict)
	assert.True(t, apierrors.IsConflict(err))
	assert.Zero(t, res.RequeueAfter)
	res, err = quiet(apierrors.NewNotFound(iadv1alpha1.GroupVersion.WithResource("ipaddresses").GroupResource(), "a"))
	assert.NoError(t, err)
	assert.Equal(t, conflictRetry, res.RequeueAfter)
}
