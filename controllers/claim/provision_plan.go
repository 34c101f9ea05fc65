package claim

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// boundByFamily groups the addresses bound to the claim by family; a
// claimRef naming another uid is a stale binding and does not count.
func boundByFamily(c *iadv1alpha1.IPAddressClaim, addrs []iadv1alpha1.IPAddress) map[iadv1alpha1.IPFamily][]*iadv1alpha1.IPAddress {
	out := map[iadv1alpha1.IPFamily][]*iadv1alpha1.IPAddress{}
	for i := range addrs {
		a := &addrs[i]
		if !draw.BindsClaim(a, c.Namespace, c.Name, c.UID) {
			continue
		}
		if f := names.AddressFamily(a.Spec.Address); f != "" {
			out[f] = append(out[f], a)
		}
	}
	return out
}

// step is what the claim controller does next for one family (planFamily).
type step int

const (
	stepNone step = iota
	stepCreatePlaceholder
	stepWaitForMetalLB
	stepRecord
	// stepHandOver: the placeholder's IPAddress is bound, the placeholder
	// not handed over yet.
	stepHandOver
	// stepDropSurplus: the core bound the family another address.
	stepDropSurplus
	// stepWaitForName: the name is taken by another address's hold.
	stepWaitForName
)

func (s step) String() string {
	return [...]string{"None", "CreatePlaceholder", "WaitForMetalLB", "Record", "HandOver", "DropSurplus", "WaitForName"}[s]
}

// planFamily decides the next step for family f from its bound addresses
// and its allocation placeholder (nil: none). Each pass re-derives it, so a
// crash between two steps re-converges.
func planFamily(f iadv1alpha1.IPFamily, bound []*iadv1alpha1.IPAddress, ph *corev1.Service) step {
	if ph == nil {
		if len(bound) > 0 {
			return stepNone
		}
		return stepCreatePlaceholder
	}
	if ph.Labels[marks.LabelPlaceholder] != names.PlaceholderAllocation {
		if len(bound) > 0 {
			return stepNone
		}
		return stepWaitForName
	}
	if len(bound) > 0 {
		if recordedBy(f, bound, ph) != nil {
			return stepHandOver
		}
		return stepDropSurplus
	}
	if draw.AssignedIP(ph, f) == "" {
		return stepWaitForMetalLB
	}
	return stepRecord
}

// recordedBy returns the address among bound that records ph: the one its
// address label names or, before it is labelled, the one of the address
// MetalLB assigned it; nil when none does.
func recordedBy(f iadv1alpha1.IPFamily, bound []*iadv1alpha1.IPAddress, ph *corev1.Service) *iadv1alpha1.IPAddress {
	label, ip := ph.Labels[marks.LabelAddress], draw.AssignedIP(ph, f)
	for _, a := range bound {
		if label != "" {
			if a.Name == label {
				return a
			}
			continue
		}
		if got, err := names.ParseAddress(a.Spec.Address); err == nil && ip != "" && got.String() == ip {
			return a
		}
	}
	return nil
}
