package marks

import "github.com/cozystack/metallb-iad/internal/names"

// The keys of every mark a Service carries for MetalLB or for the driver:
// the one place they are named. In the product only the package's own
// files use them; everything else reads and writes a Marks. Tests use
// them to build Services by hand.
const (
	// MetalLB's requests, as it reads them (controller/service.go).
	KeyPool    = "metallb.io/address-pool"
	KeyPin     = "metallb.io/loadBalancerIPs"
	KeySharing = "metallb.io/allow-shared-ip"

	// Deprecated spellings MetalLB still reads; the driver only removes them.
	KeyLegacyPool    = "metallb.universe.tf/address-pool"
	KeyLegacyPin     = "metallb.universe.tf/loadBalancerIPs"
	KeyLegacySharing = "metallb.universe.tf/allow-shared-ip"

	// KeyPinnedBy marks, with the claim, a pin the driver wrote and may withdraw.
	KeyPinnedBy = names.Domain + "pinned-by"
	// KeySharedBy marks, with the claim, a sharing key the driver wrote.
	KeySharedBy = names.Domain + "shared-by"
	// KeyOwnerPin records an imported Service's own pin, never withdrawn.
	KeyOwnerPin = names.Domain + "owner-pin"
	// KeyOwnerPool records the owner's pool request TakeOverPool removed;
	// never written back.
	KeyOwnerPool = names.Domain + "owner-address-pool"

	// LabelGrant names the class whose pool may give the Service an
	// address: class pools admit only Services carrying it, even ones
	// pinned. Reserved to the driver by the chart's admission policy.
	LabelGrant = names.Domain + "grant"
)
