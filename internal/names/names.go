// Package names holds the names the driver owns (provisioner, finalizer,
// its objects' labels and annotations; the marks it puts on Services are
// internal/marks) and the pure functions that derive object names.
package names

// Provisioner is the driver's name in IPAddressClass.spec.provisioner.
const Provisioner = "metallb.drivers.local.sdn.cozystack.io"

// Domain prefixes every label, annotation and finalizer the driver writes.
const Domain = Provisioner + "/"

const (
	// Finalizer makes an IPAddress wait for its MetalLB allocation's release.
	Finalizer = Domain + "teardown"

	// LabelWarm ("true") marks warm reservations, the only ones scaled down.
	LabelWarm = Domain + "warm"

	// LabelPlaceholder marks a placeholder Service; its value is the role.
	LabelPlaceholder = Domain + "placeholder"
	// LabelAddress names the IPAddress a placeholder holds (or will hold).
	LabelAddress = Domain + "ipaddress"
	// LabelClaimUID is the uid of the claim an allocation placeholder serves.
	LabelClaimUID = Domain + "claim-uid"

	// AnnotationClaimNamespace, AnnotationClaimName and AnnotationFamily
	// record, on an allocation placeholder, which claim and family it serves.
	AnnotationClaimNamespace = Domain + "claim-namespace"
	AnnotationClaimName      = Domain + "claim-name"
	AnnotationFamily         = Domain + "family"
	// AnnotationClass records the class whose pool the placeholder draws from.
	AnnotationClass = Domain + "class"
)

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
