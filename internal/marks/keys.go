package marks

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

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
	// KeyOwnerPool records the owner's pool request takeOverPool removed;
	// never written back.
	KeyOwnerPool = names.Domain + "owner-address-pool"

	// LabelGrant names the class whose pool may give the Service an
	// address: class pools admit only Services carrying it, even ones
	// pinned. Reserved to the driver by the chart's admission policy.
	LabelGrant = names.Domain + "grant"

	// KeyClaim is the tenant's request: the claim to attach (the core's
	// contract names it).
	KeyClaim = iadv1alpha1.ServiceClaimAnnotation
	// KeyImportedInto marks an imported Service with its generated claim.
	KeyImportedInto = names.Domain + "imported-into"
	// KeyMetalLBRetry carries when a refused Service was last handed back
	// to MetalLB; removed once it holds its address.
	KeyMetalLBRetry = names.Domain + "metallb-retry"
	// KeyClearsStaleAllocation marks the short-lived headless Service
	// created to make MetalLB forget a stale allocation.
	KeyClearsStaleAllocation = names.Domain + "clears-stale-allocation"
)

// GrantSelector is the serviceAllocation.serviceSelectors entry of a class
// pool: only Services carrying the grant label with the class's name.
func GrantSelector(class string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{LabelGrant: class}}
}

// GrantText is the grant label of class as a reader writes it, key=class,
// for messages.
func GrantText(class string) string { return LabelGrant + "=" + class }

// ClaimText is the claim annotation as a tenant writes it, for messages.
func ClaimText() string { return KeyClaim + ": <claim name>" }
