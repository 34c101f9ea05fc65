package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// AllocationPlaceholderName is the placeholder drawing a claim's address of
// one family; deterministic, so racing reconciles collide on create instead
// of allocating twice.
func AllocationPlaceholderName(claimUID types.UID, family string) string {
	return "alloc-" + strings.ToLower(family) + "-" + string(claimUID)
}

// HoldPlaceholderName is "hold-" and the address name, or a hash of the name
// where that would not be a valid DNS-1035 label (long or dotted names).
func HoldPlaceholderName(addressName string) string {
	n := "hold-" + addressName
	if len(validation.IsDNS1035Label(n)) == 0 {
		return n
	}
	sum := sha256.Sum256([]byte(addressName))
	return "hold-" + hex.EncodeToString(sum[:])[:40]
}

// Marks of stale-allocation handling (docs/design.md §3), shared by the
// IPAddress and claim controllers.
const (
	// AnnotationClearsStaleAllocation marks the headless Service stale.Clear
	// creates and deletes.
	AnnotationClearsStaleAllocation = Domain + "clears-stale-allocation"
	// AnnotationMetalLBRetry carries when a refused Service was last handed back
	// to MetalLB; removed once it holds its address.
	AnnotationMetalLBRetry = Domain + "metallb-retry"
	// MetalLBIPAllocated is the reason of MetalLB's Event on an assignment.
	MetalLBIPAllocated = "IPAllocated"
)
