package ipaddress

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// unauthorizedHolders lists the holders without the binding's authority;
// the driver's own placeholders are exempt (marks.Exempt).
func unauthorizedHolders(a *iadv1alpha1.IPAddress, holders []corev1.Service, placeholderNamespace string) []*corev1.Service {
	var out []*corev1.Service
	for i := range holders {
		s := &holders[i]
		if marks.Exempt(s, placeholderNamespace) || marks.Authorizes(a, s) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// conflictSettle is how long after Conflict turned True the controller
// waits before judging that nobody holds the address wrongfully, so its
// Service cache can catch up with the holder the Service controller saw.
const conflictSettle = 2 * time.Second

// conflictSettling is how much longer a Conflict that turned True recently
// waits to be judged; 0 for no wait.
func conflictSettling(a *iadv1alpha1.IPAddress, now time.Time) time.Duration {
	c := meta.FindStatusCondition(a.Status.Conditions, conditions.Conflict)
	if c == nil || c.Status != metav1.ConditionTrue {
		return 0
	}
	if d := c.LastTransitionTime.Add(conflictSettle).Sub(now); d > 0 {
		return d
	}
	return 0
}
