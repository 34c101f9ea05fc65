package classparams

import (
	"slices"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// GrantSettle is how long every address of a class must have reported
// Granted before its pool starts requiring the grant. MetalLB checks a
// changed pool against every Service as its own cache shows them, and a
// label written a moment before may not be in that cache yet: the holder
// would lose its address until MetalLB sees the label.
const GrantSettle = 3 * time.Second

// GrantDecision decides whether the class pool is rendered with the grant
// selector. Once a pool requires the grant it keeps requiring it. A pool
// rendered without it (by an older driver, or for a class whose addresses
// predate the selector) gains it only once every address of the class
// reports condition Granted True, and has for GrantSettle at now: the
// IPAddress controller sets it when every Service holding the address for
// the driver (its placeholders, the Service it is attached to) carries the
// grant label. Adding the selector earlier would make MetalLB take the
// address from a holder still without the label. waiting lists the
// addresses not granted yet, by name; after, when every address is
// granted but not for long enough, says when to decide again.
func GrantDecision(existing *metallbv1beta1.IPAddressPool, class string, addrs []iadv1alpha1.IPAddress, now time.Time) (grant bool, waiting []string, after time.Duration) {
	if existing == nil || marks.RequiresGrant(existing, class) {
		// A new pool has no holders to lose.
		return true, nil, 0
	}
	for i := range addrs {
		a := &addrs[i]
		if a.DeletionTimestamp != nil {
			continue // its teardown releases its holders
		}
		c := meta.FindStatusCondition(a.Status.Conditions, conditions.Granted)
		if c == nil || c.Status != metav1.ConditionTrue {
			waiting = append(waiting, a.Name)
			continue
		}
		if left := GrantSettle - now.Sub(c.LastTransitionTime.Time); left > after {
			after = left
		}
	}
	slices.Sort(waiting)
	if len(waiting) > 0 {
		return false, waiting, 0
	}
	return after <= 0, nil, max(after, 0)
}
