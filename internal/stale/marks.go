package stale

// The marks of stale-allocation handling, shared by the IPAddress and
// claim controllers.
const (
	// ReasonIPAllocated is the reason of MetalLB's Event on an assignment.
	ReasonIPAllocated = "IPAllocated"
)
