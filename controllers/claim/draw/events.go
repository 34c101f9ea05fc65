package draw

import (
	"fmt"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/stale"
	"k8s.io/apimachinery/pkg/types"
)

// ReasonStaleAllocationCleared (Normal, on the class): a stale MetalLB
// allocation of a free address was cleared (stale.go).
const ReasonStaleAllocationCleared = stale.ReasonCleared

func msgStaleFreeCleared(ip string, key types.NamespacedName) string {
	return fmt.Sprintf("MetalLB still booked %s, which no IPAddress records, for Service %s, which no longer exists "+
		"(MetalLB missed its deletion while it was starting), and refused new placeholders for lack of room; "+
		"a Service of that name was created and deleted so that MetalLB lets go of the address", ip, key)
}

// BindingWords says in words what an IPAddress is bound to.
func BindingWords(a *iadv1alpha1.IPAddress) string {
	r := a.Spec.ClaimRef
	if r == nil {
		phase := string(a.Status.Phase)
		if phase == "" {
			phase = "no phase yet"
		}
		return fmt.Sprintf("is bound to no claim (%s)", phase)
	}
	if r.UID == "" {
		return fmt.Sprintf("is bound to claim %s/%s", r.Namespace, r.Name)
	}
	return fmt.Sprintf("is bound to claim %s/%s (uid %s)", r.Namespace, r.Name, r.UID)
}
