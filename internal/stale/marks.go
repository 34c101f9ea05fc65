package stale

import "github.com/cozystack/metallb-iad/internal/names"

// The marks of stale-allocation handling, shared by the IPAddress and
// claim controllers.
const (
	// AnnotationClearsStaleAllocation marks the headless Service stale.Clear
	// creates and deletes.
	AnnotationClearsStaleAllocation = names.Domain + "clears-stale-allocation"
	// AnnotationMetalLBRetry carries when a refused Service was last handed back
	// to MetalLB; removed once it holds its address.
	AnnotationMetalLBRetry = names.Domain + "metallb-retry"
	// ReasonIPAllocated is the reason of MetalLB's Event on an assignment.
	ReasonIPAllocated = "IPAllocated"
)
