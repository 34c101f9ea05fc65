// Package stale handles MetalLB's books disagreeing with the API
// (docs/design.md §3, "Stale allocations in MetalLB").
package stale

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/patch"
)

// ReasonCleared (Normal) is the reason of the Event on what a cleared stale
// allocation was for.
const ReasonCleared = "StaleAllocationCleared"

// Clear makes MetalLB forget its allocation for key when no Service of that
// name exists, by creating a marked headless Service of that name and
// deleting it at once; it reports whether it did. A namespace gone or going
// is not an error.
func Clear(ctx context.Context, c client.Client, reader client.Reader, key types.NamespacedName, marker string) (bool, error) {
	switch err := reader.Get(ctx, key, &corev1.Service{}); {
	case err == nil:
		return false, nil // it exists: MetalLB's books are right about it
	case !apierrors.IsNotFound(err):
		return false, err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Annotations: marks.StaleClearer(marker)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone},
	}
	switch err := c.Create(ctx, svc); {
	case apierrors.IsAlreadyExists(err):
		return false, nil // someone created it just now: MetalLB processes that one
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		log.FromContext(ctx).Info("cannot clear a stale MetalLB allocation", "service", key, "error", err.Error())
		return false, nil
	case err != nil:
		return false, err
	}
	if _, err := patch.Delete(ctx, c, svc, false); err != nil {
		return false, err
	}
	return true, nil
}

// Poke makes MetalLB process a Service once more, by writing the time into
// its retry mark (marks.RetriedAt); the time also spaces the pokes.
func Poke(ctx context.Context, c client.Client, svc *corev1.Service) error {
	log.FromContext(ctx).Info("asking MetalLB to look at a Service again", "service", client.ObjectKeyFromObject(svc))
	now := time.Now()
	return SetRetryMark(ctx, c, svc, &now)
}

// SetRetryMark sets the retry mark to at (nil: removes it) in a merge
// patch of that one key (marks.RetryPatch).
func SetRetryMark(ctx context.Context, c client.Client, svc *corev1.Service, at *time.Time) error {
	body, err := marks.RetryPatch(at)
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(c.Patch(ctx, svc.DeepCopy(), client.RawPatch(types.MergePatchType, body)))
}
