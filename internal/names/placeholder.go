package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// AllocationPlaceholderName is the deterministic name of the placeholder
// Service that draws a claim's address of one family. Two racing reconciles
// of the same claim collide on create instead of allocating twice.
// family is "IPv4" or "IPv6".
func AllocationPlaceholderName(claimUID types.UID, family string) string {
	return "alloc-" + strings.ToLower(family) + "-" + string(claimUID)
}

// HoldPlaceholderName is the name of the placeholder Service that holds an
// existing address while it is not attached: "hold-" and the address
// object's name. Names that would not make a valid Service name (too long, or
// with dots, as an admin may choose for a static address) are replaced by a
// hash of the name, so the result is always a valid DNS-1035 label.
func HoldPlaceholderName(addressName string) string {
	n := "hold-" + addressName
	if len(validation.IsDNS1035Label(n)) == 0 {
		return n
	}
	sum := sha256.Sum256([]byte(addressName))
	return "hold-" + hex.EncodeToString(sum[:])[:40]
}

// Stale allocations in MetalLB (docs/design.md §3): the marks the
// IPAddress and claim controllers share.
const (
	// AnnotationClearsStaleAllocation marks the short-lived headless
	// Service created (and deleted at once) to make MetalLB forget an
	// allocation it keeps for a Service that no longer exists.
	AnnotationClearsStaleAllocation = Domain + "clears-stale-allocation"
	// AnnotationMetalLBRetry carries the time a Service MetalLB refused was
	// last given to MetalLB again; removed once the Service holds its
	// address.
	AnnotationMetalLBRetry = Domain + "metallb-retry"
	// MetalLBIPAllocated is the reason of the Normal Event MetalLB records
	// on a Service it assigned addresses to.
	MetalLBIPAllocated = "IPAllocated"
)
