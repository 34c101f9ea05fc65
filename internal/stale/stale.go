// Package stale holds the two writes the driver makes when MetalLB's books
// disagree with the API (docs/design.md §3, stale allocations): clearing an
// allocation MetalLB keeps for a Service that no longer exists, and making
// MetalLB look again at a Service it refused, which it does not retry by
// itself. The IPAddress and claim controllers share them.
package stale

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/metallb-iad/internal/names"
)

// Clear makes MetalLB process the name key once more if no Service of that
// name exists (read from the API server, not a cache): a headless Service
// of that name, marked with what it clears for, is created and deleted at
// once (only the one created here, by uid). MetalLB processes the name,
// finds no LoadBalancer and forgets the allocation. It reports whether it
// did; a namespace that is gone or being deleted takes no new Service, and
// MetalLB keeps the address until it restarts.
func Clear(ctx context.Context, c client.Client, reader client.Reader, key types.NamespacedName, marker string) (bool, error) {
	switch err := reader.Get(ctx, key, &corev1.Service{}); {
	case err == nil:
		return false, nil // it exists: MetalLB's books are right about it
	case !apierrors.IsNotFound(err):
		return false, err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Annotations: map[string]string{names.AnnotationClearsStaleAllocation: marker}},
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
	uid := svc.UID
	if err := c.Delete(ctx, svc, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return false, err
	}
	return true, nil
}

// Poke makes MetalLB process a Service once more, by writing the time into
// its names.AnnotationMetalLBRetry; the time also spaces the pokes.
func Poke(ctx context.Context, c client.Client, svc *corev1.Service) error {
	log.FromContext(ctx).Info("asking MetalLB to look at a Service again", "service", client.ObjectKeyFromObject(svc))
	return SetRetryMark(ctx, c, svc, time.Now().UTC().Format(time.RFC3339Nano))
}

// SetRetryMark sets (or, with nil, removes) names.AnnotationMetalLBRetry,
// in a merge patch of that one key.
func SetRetryMark(ctx context.Context, c client.Client, svc *corev1.Service, v any) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{names.AnnotationMetalLBRetry: v}}})
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(c.Patch(ctx, svc.DeepCopy(), client.RawPatch(types.MergePatchType, body)))
}

// EventFirstTime is when an Event first happened, whichever API wrote it.
func EventFirstTime(e *corev1.Event) time.Time {
	if !e.FirstTimestamp.IsZero() {
		return e.FirstTimestamp.Time
	}
	return eventRecordTime(e)
}

// EventTime is when an Event last happened, whichever API wrote it.
func EventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	default:
		return eventRecordTime(e)
	}
}

// eventRecordTime is an Event's time where it has none of the older API's
// timestamps: its eventTime, else when the object was created.
func eventRecordTime(e *corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
