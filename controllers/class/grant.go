package class

import (
	"context"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// decideGrant decides from the cache whether the pool requires the grant
// label (GrantDecision). If not, it says what the grant waits for: the
// addresses the IPAddress controller has not reported Granted yet (it
// reports WaitingForGrant once per change), or, every address granted only
// a moment ago, the settle period.
func (r *Reconciler) decideGrant(ctx context.Context, class *iadv1alpha1.IPAddressClass) (bool, phase.Result, error) {
	existing := &metallbv1beta1.IPAddressPool{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: r.MetalLBNamespace, Name: names.PoolName(class.Name)}, existing); {
	case kerrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return false, phase.Next(), err
	}
	var addrs iadv1alpha1.IPAddressList
	if existing != nil && !marks.RequiresGrant(existing, class.Name) {
		if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClass: class.Name}); err != nil {
			return false, phase.Next(), err
		}
	}
	grant, waiting, settle := classparams.GrantDecision(existing, class.Name, addrs.Items, time.Now())
	switch {
	case grant:
		r.grantReported.Forget(class.Name)
		return true, phase.Next(), nil
	case len(waiting) == 0 && settle > 0:
		return false, phase.RetryAfter(settle, "every address was granted a moment ago"), nil
	case len(waiting) == 0:
		return false, phase.Next(), nil
	}
	msg := msgWaitingForGrant(r.MetalLBNamespace, class.Name, waiting)
	if r.grantReported.Changed(class.Name, msg) {
		log.FromContext(ctx).Info("the pool does not require the grant label yet", "waiting", len(waiting))
		r.Recorder.Event(class, corev1.EventTypeNormal, ReasonWaitingForGrant, msg)
	}
	return false, phase.WaitFor("every address of the class to be Granted", 0), nil
}
