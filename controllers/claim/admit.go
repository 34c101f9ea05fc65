package claim

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// checkServed ends the pass of a claim that is not this driver's to
// provision (served), forgetting it.
func (r *Reconciler) checkServed(_ context.Context, s *scope) (phase.Result, error) {
	if !served(s.claim) {
		r.forget(s.key)
		return phase.Halt("the claim is not this driver's to provision", 0), nil
	}
	return phase.Next(), nil
}

// loadClass scopes the claim's class. A claim whose class the core has not
// resolved yet, or whose class this driver cannot serve (said on the claim,
// classProblem), ends the pass, forgotten.
func (r *Reconciler) loadClass(ctx context.Context, s *scope) (phase.Result, error) {
	name := className(s.claim)
	if name == "" {
		r.forget(s.key)
		return phase.HaltFor("the core to resolve the claim's class", 0), nil
	}
	class := &iadv1alpha1.IPAddressClass{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, class); err != nil {
		if !apierrors.IsNotFound(err) {
			r.forget(s.key)
			return phase.Next(), err
		}
		class = nil
	}
	if problem := classProblem(name, class); problem != "" {
		if s.claim.Status.Phase != iadv1alpha1.ClaimBound { // a Bound claim never needs its class again
			r.report(s.claim, "class", corev1.EventTypeWarning, ReasonClassNotServed, problem)
		}
		r.forget(s.key)
		return phase.Halt("the class cannot be served", 0), nil
	}
	r.report(s.claim, "class", "", "", "")
	s.class = class
	return phase.Next(), nil
}
