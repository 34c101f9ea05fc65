// Package names holds the names the driver owns (its provisioner, domain,
// placeholder roles and lease) and the pure functions that derive object
// names; every label, annotation and finalizer key is in internal/marks
// (keys.go).
package names

// Provisioner is the driver's name in IPAddressClass.spec.provisioner.
const Provisioner = "metallb.drivers.local.sdn.cozystack.io"

// Domain prefixes every label, annotation and finalizer the driver writes.
const Domain = Provisioner + "/"

// Placeholder roles, the values of LabelPlaceholder.
const (
	// PlaceholderAllocation draws a fresh address from the class pool for a claim.
	PlaceholderAllocation = "allocation"
	// PlaceholderHold keeps an existing address reserved while it is not attached.
	PlaceholderHold = "hold"
	// PlaceholderWarm draws a fresh address for no claim yet: a warm reservation.
	PlaceholderWarm = "warm"
)

// LeaseID is the leader-election lease of one controller binary.
func LeaseID(controller string) string { return "metallb-iad-" + controller }

// PoolName is the MetalLB IPAddressPool (and advertisement) rendered for a class.
func PoolName(class string) string { return "iad-" + class }
