package phase

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// onConflict is the controllers' one conflict retry: when err is a
// conflict (or joins only conflicts), the pass acted on a stale read and the
// newer version's event follows, so it is requeued after ConflictRetry,
// quietly. Any other error is returned as it is, with res.
func onConflict(ctx context.Context, res ctrl.Result, err error) (ctrl.Result, error) {
	if err == nil {
		return res, nil
	}
	if !allConflicts(err) {
		return res, err
	}
	log.FromContext(ctx).V(1).Info("acted on a stale read; retrying", "error", err.Error())
	return ctrl.Result{RequeueAfter: ConflictRetry}, nil
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
	// A joined error wrapped by a phase name is judged by its parts: errors.As
	// alone would stop at the first conflict among them.
	if _, isStatus := err.(apierrors.APIStatus); !isStatus {
		if inner := errors.Unwrap(err); inner != nil {
			return allConflicts(inner)
		}
	}
	return apierrors.IsConflict(err)
}
