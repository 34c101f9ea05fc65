package ipaddress

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// awaitCache ends a pass on an address whose cache copy does not show this
// controller's last status write yet: the pass would write the same report
// again, into a conflict.
func (r *Reconciler) awaitCache(_ context.Context, s *scope) (phase.Result, error) {
	if r.written.Behind(s.Addr.Name, s.Addr.ResourceVersion) {
		return phase.Halt("the cache has not shown the last status write yet", lookAgain), nil
	}
	return phase.Next(), nil
}

// reportStatus is the last phase: the status patch, then the gauge.
func (r *Reconciler) reportStatus(ctx context.Context, s *scope) (phase.Result, error) {
	wait, err := r.patchStatus(ctx, s)
	if err != nil {
		return phase.Next(), err
	}
	if wait > 0 {
		return phase.WaitFor("the core to set the new address's phase before the first report", wait), nil
	}
	r.states.set(s.Addr.Name, s.Addr.Spec.ClassName, addressState(s.Addr))
	return phase.Next(), nil
}

// patchStatus writes the status the phases computed in one merge patch with
// an optimistic lock, so it never clobbers another controller's write
// since the read, then records the Events about the change. The first
// report on a new address waits, and the wait is returned
// (firstReportDeferral), unless a hold placeholder is created after it
// (hold.Keeper.CreateHold), which rides on its lock.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope) (time.Duration, error) {
	if !equality.Semantic.DeepEqual(s.orig.Status, s.Addr.Status) {
		creating := s.CreatesHold()
		if wait := firstReportDeferral(s.orig, s.Addr, time.Now()); wait > 0 && !creating {
			return wait, nil
		}
		if err := patch.StatusSince(ctx, r, s.Addr, s.orig); err != nil {
			return 0, err
		}
		// A patch that changed nothing leaves the version: nothing to wait for.
		if s.Addr.ResourceVersion != s.orig.ResourceVersion {
			r.written.Wrote(s.Addr.Name, s.orig.ResourceVersion)
		}
	}
	for _, e := range s.AfterPatch {
		r.Recorder.Event(e.Object, e.Type, e.Reason, e.Message)
	}
	if s.lostTold {
		r.lostAnnounced.Store(s.Addr.UID, true)
	}
	return 0, nil
}
