package claim

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// scope is what one pass over a claim works from.
type scope struct {
	key   types.NamespacedName
	claim *iadv1alpha1.IPAddressClaim
	// class is the claim's class (loadClass).
	class *iadv1alpha1.IPAddressClass
	// tenancy is the class's, read by checkAdmitted for a claim that
	// still misses an address.
	tenancy classparams.Tenancy
	// bound holds the addresses bound to the claim, by family (loadBound).
	bound map[iadv1alpha1.IPFamily][]*iadv1alpha1.IPAddress
	// unbound holds, per family of the claim, whether it still misses an
	// address at the end of the pass.
	unbound map[iadv1alpha1.IPFamily]bool
	// blocked is set when a family waits on the state of its class's
	// ledger, which only an address's change ends: the address watch wakes
	// such claims (addressToClaims).
	blocked bool
}

// familyScope is one family's step within a claim's pass
// (reconcileFamily): its allocation placeholder and step (planStep), and
// whether the family is bound when its phases end.
type familyScope struct {
	*scope
	f    iadv1alpha1.IPFamily
	ph   *corev1.Service
	step step
	// isBound: the family holds an address after the step.
	isBound bool
	// refusedSince is when MetalLB first refused the placeholder for
	// lack of room (observe); zero when it did not.
	refusedSince time.Time
}

// waitOnClass is the result of a family that waits on its class's ledger.
func (s *scope) waitOnClass(reason string, fallback time.Duration) phase.Result {
	s.blocked = true
	return phase.WaitFor(reason, fallback)
}

// pending reports whether a family of the claim still misses an address.
func (s *scope) pending() bool {
	for _, u := range s.unbound {
		if u {
			return true
		}
	}
	return false
}
