// Package patch holds the ways the controllers write what they own; a write
// that loses a race is retried by phase.Run, the one conflict retry.
package patch

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Meta applies change to obj and writes it (metadata or spec) in one merge
// patch locked to obj's resourceVersion: a write resting on a stale read
// conflicts, which also makes replacing whole lists (finalizers) safe.
func Meta(ctx context.Context, c client.Writer, obj client.Object, change func()) error {
	orig := obj.DeepCopyObject().(client.Object)
	change()
	return MetaSince(ctx, c, obj, orig)
}

// MetaSince is Meta for a change already made to obj since orig.
func MetaSince(ctx context.Context, c client.Writer, obj, orig client.Object) error {
	return c.Patch(ctx, obj, locked(orig))
}

// Status is Meta for the status subresource.
func Status(ctx context.Context, c client.StatusClient, obj client.Object, change func()) error {
	orig := obj.DeepCopyObject().(client.Object)
	change()
	return StatusSince(ctx, c, obj, orig)
}

// StatusSince is Status for a change already made to obj since orig.
func StatusSince(ctx context.Context, c client.StatusClient, obj, orig client.Object) error {
	return c.Status().Patch(ctx, obj, locked(orig))
}

// Unlocked is Meta without the lock: only for fields no one else writes,
// where a concurrent write elsewhere must not fail the patch.
func Unlocked(ctx context.Context, c client.Writer, obj client.Object, change func()) error {
	orig := obj.DeepCopyObject().(client.Object)
	change()
	return c.Patch(ctx, obj, client.MergeFrom(orig))
}

func locked(orig client.Object) client.Patch {
	return client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
}

// AddFinalizer adds finalizer to obj, locked, unless it is there already.
func AddFinalizer(ctx context.Context, c client.Writer, obj client.Object, finalizer string) error {
	if controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	return Meta(ctx, c, obj, func() { controllerutil.AddFinalizer(obj, finalizer) })
}

// RemoveFinalizer removes finalizer from obj, locked, and reports whether
// it wrote; a NotFound is returned for the caller to judge.
func RemoveFinalizer(ctx context.Context, c client.Writer, obj client.Object, finalizer string) (bool, error) {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return false, nil
	}
	if err := Meta(ctx, c, obj, func() { controllerutil.RemoveFinalizer(obj, finalizer) }); err != nil {
		return false, err
	}
	return true, nil
}

// Sooner returns the result with the sooner requeue (zero yields).
func Sooner(a, b ctrl.Result) ctrl.Result {
	if a.RequeueAfter == 0 || (b.RequeueAfter != 0 && b.RequeueAfter < a.RequeueAfter) {
		return b
	}
	return a
}

// WaitForCache polls from firstPoll doubling to maxPoll, since the watch
// event usually follows within a millisecond or two and the waiting pass
// holds its worker; every liveEvery it asks whether the object is gone.
const (
	firstPoll = time.Millisecond
	maxPoll   = 10 * time.Millisecond
	liveEvery = 500 * time.Millisecond
)

// WaitForCache waits, at most timeout, until the cache shows obj's key and
// seen (nil: any version) accepts it, so no later pass misses this write;
// with live set it stops once the object is gone from the API server too.
func WaitForCache(ctx context.Context, cache, live client.Reader, obj client.Object, seen func(client.Object) bool, timeout time.Duration) error {
	key := client.ObjectKeyFromObject(obj)
	probe := obj.DeepCopyObject().(client.Object)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nextLive := time.Now().Add(liveEvery)
	for poll := firstPoll; ; poll = min(2*poll, maxPoll) {
		err := cache.Get(ctx, key, probe)
		switch {
		case err == nil:
			if seen == nil || seen(probe) {
				return nil
			}
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("wait for the cache to show %s: %w", key, err)
		case live != nil && !time.Now().Before(nextLive):
			nextLive = time.Now().Add(liveEvery)
			if err := live.Get(ctx, key, probe); apierrors.IsNotFound(err) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the cache to show %s: %w", key, ctx.Err())
		case <-time.After(poll):
		}
	}
}
