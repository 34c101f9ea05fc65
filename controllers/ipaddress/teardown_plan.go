package ipaddress

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// releaseAction is the teardown's next step on a Service (releaseStep).
type releaseAction int

const (
	releaseNone     releaseAction = iota // not the driver's pin for the address, or the Service is being deleted
	releasePin                           // write the release pin, withdraw the driver's key
	releaseWait                          // wait for MetalLB to take the address back
	releaseWithdraw                      // withdraw the release pin and the markers
	releaseDropIP                        // remove the IP from a pin the Service does not hold yet
)

// releaseStep decides the teardown's next step on a Service and what to
// write: one holding the IP gets the release pin, then loses pin and
// markers once its ingress is empty; one pinned without holding it yet
// loses the IP. Only the driver's pins (pinned-by marker) that name the IP
// or that the binding authorizes are released; a Service let go in one
// write (marks.LetGo) is only waited for.
func releaseStep(svc *corev1.Service, a *iadv1alpha1.IPAddress, ip string) (releaseAction, marks.Marks) {
	m := marks.Of(svc)
	if marks.LetGo(a, svc) && marks.Holds(svc, ip) {
		return releaseWait, m
	}
	if m.PinnedBy == "" || svc.DeletionTimestamp != nil {
		return releaseNone, m
	}
	pin := m.Pin
	pinned := slices.Contains(m.PinIPs(), ip)
	if !pinned && !marks.Authorizes(a, svc) {
		return releaseNone, m
	}
	ingress := marks.IngressIPs(svc)
	holds, anyIngress := slices.Contains(ingress, ip), len(ingress) > 0
	release := marks.ReleasePinValue(svc)
	switch {
	case holds && pin != release:
		m.Release(release)
		return releasePin, m
	case holds:
		return releaseWait, m
	case marks.IsReleasePin(pin) && anyIngress:
		return releaseWait, m // MetalLB drops every address at once; not yet
	case marks.IsReleasePin(pin):
		m.Withdraw()
		return releaseWithdraw, m
	case pinned:
		m.DropIP(ip)
		return releaseDropIP, m
	}
	return releaseNone, m
}
