package ipaddress

import (
	"time"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// firstReportWindow bounds how long the first report waits for the core.
const firstReportWindow = 10 * time.Second

// firstReportDeferral is how much longer the first status report on a new
// address (orig has no status) waits; 0 to write it now. The core writes a
// new address two or three times, and a report locked to a version before
// one of them fails; so a report of conditions waits until the core set
// the phase, or the window passed. A phase the driver sets goes at once.
func firstReportDeferral(orig, next *iadv1alpha1.IPAddress, now time.Time) time.Duration {
	if orig.Status.Phase != "" || len(orig.Status.Conditions) > 0 || orig.Status.AssociatedTo != nil ||
		next.Status.Phase != "" || orig.DeletionTimestamp != nil {
		return 0
	}
	if d := orig.CreationTimestamp.Add(firstReportWindow).Sub(now); d > 0 {
		return d
	}
	return 0
}
