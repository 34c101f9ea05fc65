// Package patch holds the few ways the controllers write what they own:
// merge patches of metadata, spec or status that carry an optimistic lock,
// the finalizer add and remove built on them, the one retry that turns a
// lost optimistic-lock race into a quiet requeue, the wait until the cache
// shows a write, and the record that lets a pass see that it has not.
package patch

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Meta applies change to obj and writes what changed (metadata or spec) in
// one merge patch with an optimistic lock: the patch carries the
// resourceVersion obj was read at, so it fails with a conflict instead of
// resting on a stale read. Lists (finalizers, owner references) are
// replaced whole by a merge patch; the lock makes that safe.
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

// Unlocked applies change to obj and writes it in a merge patch without a
// lock: only for fields no one else writes, where a concurrent write to
// other fields must not fail the patch.
func Unlocked(ctx context.Context, c client.Writer, obj client.Object, change func()) error {
	orig := obj.DeepCopyObject().(client.Object)
	change()
	return c.Patch(ctx, obj, client.MergeFrom(orig))
}

func locked(orig client.Object) client.Patch {
	return client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
}

// AddFinalizer adds finalizer to obj, with an optimistic lock, unless it is
// there already.
func AddFinalizer(ctx context.Context, c client.Writer, obj client.Object, finalizer string) error {
	if controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	return Meta(ctx, c, obj, func() { controllerutil.AddFinalizer(obj, finalizer) })
}

// RemoveFinalizer removes finalizer from obj, with an optimistic lock. It
// reports whether it wrote; a write that finds obj gone returns the
// NotFound error, for the caller to judge.
func RemoveFinalizer(ctx context.Context, c client.Writer, obj client.Object, finalizer string) (bool, error) {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return false, nil
	}
	if err := Meta(ctx, c, obj, func() { controllerutil.RemoveFinalizer(obj, finalizer) }); err != nil {
		return false, err
	}
	return true, nil
}

// Sooner combines two results of one pass, keeping the sooner requeue (a
// result without one yields to the other).
func Sooner(a, b ctrl.Result) ctrl.Result {
	if a.RequeueAfter == 0 || (b.RequeueAfter != 0 && b.RequeueAfter < a.RequeueAfter) {
		return b
	}
	return a
}

// OnConflict is the one conflict retry of the controllers. A pass whose
// errors (nil ones are ignored) are all optimistic-lock conflicts acted on
// a stale read; the newer version's own event follows, so the pass is
// quietly requeued after the given delay instead of failing. Any other
// error is returned, with res, as it is; without errors res is returned.
func OnConflict(ctx context.Context, after time.Duration, res ctrl.Result, errs ...error) (ctrl.Result, error) {
	var failed []error
	for _, e := range errs {
		if e != nil {
			failed = append(failed, e)
		}
	}
	var err error
	switch len(failed) {
	case 0:
		return res, nil
	case 1:
		err = failed[0]
	default:
		err = errors.Join(failed...)
	}
	if !allConflicts(err) {
		return res, err
	}
	log.FromContext(ctx).V(1).Info("acted on a stale read; retrying", "error", err.Error())
	return ctrl.Result{RequeueAfter: after}, nil
}

func allConflicts(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !allConflicts(e) {
				return false
			}
		}
		return true
	}
	return apierrors.IsConflict(err)
}

// WaitForCache looks at the cache first after firstPoll and then at twice
// the interval each time, up to maxPoll: a watch event usually follows the
// write's answer within a millisecond or two, and a pass that waits for it
// holds its worker (the claim controller's draws run one at a time, so
// this wait is part of every claim). Every liveEvery it asks the API server
// whether the object is gone.
const (
	firstPoll = time.Millisecond
	maxPoll   = 10 * time.Millisecond
	liveEvery = 500 * time.Millisecond
)

// WaitForCache waits, at most timeout, until the cache shows the object of
// obj's key and seen (nil: any version) accepts it, so that no later pass
// acts on a read that misses this pass's write. When live is set it stops
// early, without error, once the object is gone from the API server as
// well (deleted right after it was written): then there is nothing left
// to wait for. obj itself is not changed.
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
