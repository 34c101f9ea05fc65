package patch

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Delete deletes the very object that was read: the uid precondition spares
// a same-named successor, exact adds resourceVersion (a conflict, for
// the conflict retry of phase.Run). NotFound is not an error; deleted reports this call did it.
func Delete(ctx context.Context, c client.Writer, obj client.Object, exact bool) (deleted bool, err error) {
	uid := obj.GetUID()
	pre := client.Preconditions{UID: &uid}
	if exact {
		rv := obj.GetResourceVersion()
		pre.ResourceVersion = &rv
	}
	switch err := c.Delete(ctx, obj, pre); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// CreateAndWait creates obj and waits, at most timeout, until the cache
// shows it; an existing object is not an error, and is not waited for.
func CreateAndWait(ctx context.Context, c client.Client, live client.Reader, obj client.Object, timeout time.Duration) (created bool, err error) {
	switch err := c.Create(ctx, obj); {
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, WaitForCache(ctx, c, live, obj, nil, timeout)
}
