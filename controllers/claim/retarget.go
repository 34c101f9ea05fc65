package claim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// dropRetargeted deletes the claim's allocation placeholders that still
// draw for another class than the one the claim names now (none when the
// claim is no longer this driver's): a Pending claim retargeted must get
// nothing from the old class. The family is drawn again from the new one.
func (r *Reconciler) dropRetargeted(ctx context.Context, s *scope) (phase.Result, error) {
	claim := s.claim
	if claim.DeletionTimestamp != nil {
		return phase.Next(), nil
	}
	class := ""
	if served(claim) {
		class = className(claim)
	}
	for _, f := range iadv1alpha1.FamilyDual.Families() {
		ph, err := r.allocationPlaceholder(ctx, claim, f)
		if err != nil {
			return phase.Next(), err
		}
		if !retargeted(ph, class) {
			continue
		}
		switch deleted, err := patch.Delete(ctx, r.Client, ph, true); {
		case err != nil:
			return phase.Next(), fmt.Errorf("delete placeholder %s of a class the claim no longer names: %w", ph.Name, err)
		case !deleted:
			continue
		}
		old := ph.Annotations[marks.KeyClass]
		log.FromContext(ctx).Info("deleted the allocation placeholder of a class the claim no longer names", "placeholder", ph.Name, "was", old, "now", class)
		r.Recorder.Event(claim, corev1.EventTypeNormal, ReasonRetargeted, msgRetargeted(f, old, class))
	}
	return phase.Next(), nil
}
