package warm

import (
	"fmt"
	"strings"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
)

// The warm controller's Event reasons.
const (
	ReasonWarmRecorded = "WarmAddressRecorded"
	ReasonWarmPoolFull = "WarmPoolFull" // Warning
	// ReasonWarmDropped (Normal): a warm address outside the edited
	// ranges was deleted, so that the class can be rendered.
	ReasonWarmDropped  = "WarmAddressDropped"
	ReasonWarmReturned = "WarmAddressReturned"
)

func msgWarmRecorded(f iadv1alpha1.IPFamily, ip, address string) string {
	return fmt.Sprintf("Recorded warm %s address %s as Available IPAddress %s", f, ip, address)
}

func msgWarmPoolFull(f iadv1alpha1.IPFamily, target int) string {
	return fmt.Sprintf("The class's %s ranges have no room for the %d warm addresses asked for; the driver keeps what fits and asks MetalLB for no more", f, target)
}

func msgWarmDropped(a *iadv1alpha1.IPAddress) string {
	return fmt.Sprintf("Deleted warm address %s (IPAddress %s, bound to no claim): the class's addresses no longer contain it", a.Spec.Address, a.Name)
}

func msgWarmReturned(f iadv1alpha1.IPFamily, ip string, entry *iadv1alpha1.IPAddress) string {
	return fmt.Sprintf("MetalLB gave a warm placeholder %s address %s, which IPAddress %s records (%s); the driver gave it back and allocates another",
		f, ip, entry.Name, strings.TrimPrefix(draw.BindingWords(entry), "is "))
}
