package stale

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// metallbStatusWritesPerSecond is MetalLB's API client limit (v0.15.2).
// Where the API server defaults ipMode into load-balancer statuses,
// MetalLB rewrites every allocated Service's status in each full pass.
const metallbStatusWritesPerSecond = 20

// PassTime is how long a MetalLB full pass takes over allocated Services.
func PassTime(allocated int64) time.Duration {
	return time.Duration(allocated) * time.Second / metallbStatusWritesPerSecond
}

// Blocked returns the Service that should hold the address and
// holds nothing while no other Service holds it: the address's own live
// placeholder when unattached, else the attached Service pinned to ip once
// no placeholder is left. In a shared attachment neither counts as someone
// else, and the attached Service, else the hold (re-armed after a MetalLB
// restart, it can meet the deleted placeholder's allocation) is blocked.
// A Service handing the address back in the shared handoff does not count
// as holding it: it keeps it only until the re-armed hold shares it.
// placeholders are the address's own, holders every Service MetalLB
// assigned ip to, attached the one status.associatedTo names (or nil).
func Blocked(a *iadv1alpha1.IPAddress, ip, key string, placeholders, holders []corev1.Service, attached *corev1.Service) *corev1.Service {
	shared := marks.SharesHold(attached, key)
	for i := range holders {
		h := &holders[i]
		if h.DeletionTimestamp != nil || marks.HandingBack(a, key, h, placeholders) ||
			(shared && (marks.OneOf(h, placeholders) || (h.Namespace == attached.Namespace && h.Name == attached.Name))) {
			continue
		}
		return nil
	}
	if a.Status.Phase == iadv1alpha1.AddressLost || a.DeletionTimestamp != nil {
		return nil
	}
	if a.Status.AssociatedTo == nil && !shared {
		for i := range placeholders {
			ph := &placeholders[i]
			if ph.DeletionTimestamp == nil && marks.Of(ph).PinnedExactly(ip) {
				return ph
			}
		}
		return nil
	}
	if (len(placeholders) > 0 && !shared) || attached == nil || attached.DeletionTimestamp != nil {
		return nil
	}
	for _, pin := range marks.Of(attached).PinIPs() {
		if pin == ip && !marks.OneOf(attached, holders) {
			return attached
		}
	}
	if shared {
		for i := range placeholders {
			ph := &placeholders[i]
			if ph.DeletionTimestamp == nil && marks.Of(ph).PinnedExactly(ip) && !marks.OneOf(ph, holders) {
				return ph
			}
		}
	}
	return nil
}

// settled reports whether the Service holds ip and every address its
// MetalLB pin asks for.
func settled(svc *corev1.Service, ip string) bool {
	return marks.HoldsAll(svc, append(marks.Of(svc).PinIPs(), ip)...)
}
