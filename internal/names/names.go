// Package names holds every name the driver owns (provisioner, finalizer,
// labels, annotations) and the pure functions that derive object names.
package names

import "strings"

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

	// AnnotationPinnedBy marks (with the claim) a pin the driver wrote and may withdraw.
	AnnotationPinnedBy = Domain + "pinned-by"
	// AnnotationSharedBy marks (with the claim) a sharing key the driver wrote.
	AnnotationSharedBy = Domain + "shared-by"

	// LabelGrant names the class whose pool may give the Service an address:
	// class pools admit only Services carrying it, even ones pinned. Reserved to
	// the driver by the chart's admission policy.
	LabelGrant = Domain + "grant"

	// AnnotationAttaching, on an IPAddress, names the Service granted the right
	// to attach it; written locked before any pin, so one of two racing wins.
	AnnotationAttaching = Domain + "attaching"
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

// MetalLB's annotations the driver writes or reads.
const (
	MetalLBAddressPool     = "metallb.io/address-pool"
	MetalLBLoadBalancerIPs = "metallb.io/loadBalancerIPs"
	MetalLBAllowSharedIP   = "metallb.io/allow-shared-ip"

	// MetalLBLegacyAllowSharedIP is a deprecated spelling MetalLB still reads.
	MetalLBLegacyAllowSharedIP = "metallb.universe.tf/allow-shared-ip"
	// MetalLBLegacyLoadBalancerIPs is read, never written, as above.
	MetalLBLegacyLoadBalancerIPs = "metallb.universe.tf/loadBalancerIPs"
	// MetalLBLegacyAddressPool is the deprecated pool request, still read.
	MetalLBLegacyAddressPool = "metallb.universe.tf/address-pool"
)

// LeaseID is the leader-election lease of one controller binary.
func LeaseID(controller string) string { return "metallb-iad-" + controller }

// PoolName is the MetalLB IPAddressPool (and advertisement) rendered for a class.
func PoolName(class string) string { return "iad-" + class }

// SplitIPs parses a metallb.io/loadBalancerIPs value into canonical IPs,
// skipping what does not parse.
func SplitIPs(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if ip, err := ParseAddress(f); err == nil {
			out = append(out, ip.String())
		}
	}
	return out
}
