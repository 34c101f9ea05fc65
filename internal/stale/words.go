package stale

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// msgFreeCleared is the ReasonCleared Event on a class whose free address
// ip MetalLB still booked for the Service key that no longer exists.
func msgFreeCleared(ip string, key types.NamespacedName) string {
	return fmt.Sprintf("MetalLB still booked %s, which no IPAddress records, for Service %s, which no longer exists "+
		"(MetalLB missed its deletion while it was starting), and refused new placeholders for lack of room; "+
		"a Service of that name was created and deleted so that MetalLB lets go of the address", ip, key)
}
