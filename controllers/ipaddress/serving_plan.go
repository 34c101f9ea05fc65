package ipaddress

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// servingVerdict is the AttachmentServed condition to set, if set, with a
// Warning when it turns False.
type servingVerdict struct {
	set     bool
	status  metav1.ConditionStatus
	reason  string
	message string
	warn    bool
}

// refusedFor reports whether the condition says MetalLB refused Service key.
func refusedFor(c *metav1.Condition, key string) bool {
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == conditions.ReasonRefusedByMetalLB &&
		strings.HasPrefix(c.Message, msgRefusedPrefix(key))
}

// planServing decides AttachmentServed from the previous condition, the
// attached pinned Service's key ("" for none), MetalLB's refusal of its
// pin ("" for none on record) and whether it holds none of ip (unserved).
// A refusal stands while the Service holds nothing: MetalLB never looks at
// a refused Service again by itself.
func planServing(prev *metav1.Condition, ip, svc, refused string, unserved bool) servingVerdict {
	if refused != "" {
		msg := msgRefused(svc, ip, refused)
		return servingVerdict{set: true, status: metav1.ConditionFalse, reason: conditions.ReasonRefusedByMetalLB, message: msg,
			warn: prev == nil || prev.Status != metav1.ConditionFalse || prev.Message != msg}
	}
	if prev == nil || prev.Status == metav1.ConditionTrue || (unserved && refusedFor(prev, svc)) {
		return servingVerdict{}
	}
	return servingVerdict{set: true, status: metav1.ConditionTrue, reason: conditions.ReasonServiceHoldsAddress,
		message: msgNotRefused(svc != "" && !unserved)}
}

// refusalNow is what a refusal of the attached Service's pin says by now.
type refusalNow int

const (
	// refusalStands: the Service is refused for a reason of its own, or
	// for a Service that is not the address's and still holds it.
	refusalStands refusalNow = iota
	// refusalPassing: it names only the address's own placeholders, and one
	// still holds the address: the handoff is moving them away.
	refusalPassing
	// refusalOutdated: every Service it names has let go of the address
	// since; MetalLB, which never retries, is to look again.
	refusalOutdated
)

// refusalByHolders reads which Services a refusal of ip (its message msg)
// says hold the address, and judges it against the address's own
// placeholders (own) and the Services holding ip now (holding). A pin
// written on a view that was about to change (a detach and a re-attach
// crossing) meets the hold before it moves away: such a refusal is
// MetalLB's answer to a moment, not to the attachment. In a shared
// attachment (shared) the hold stays on the address, so one still holding
// it is no passing moment.
func refusalByHolders(msg, ip string, own, holding []types.NamespacedName, shared bool) refusalNow {
	named := stale.Holders(msg, ip, nil)
	if len(named) == 0 {
		return refusalStands
	}
	now := refusalOutdated
	for _, n := range named {
		if !slices.Contains(holding, n) {
			continue
		}
		if shared || !slices.Contains(own, n) {
			return refusalStands
		}
		now = refusalPassing
	}
	return now
}

// pinnedTo reports whether the Service asks MetalLB for ip: the driver's
// pin or its owner's.
func pinnedTo(svc *corev1.Service, ip string) bool {
	m := marks.Of(svc)
	if slices.Contains(m.PinIPs(), ip) {
		return true
	}
	hand := m.HandPin()
	return hand != "" && slices.Contains(names.SplitIPs(hand), ip)
}
