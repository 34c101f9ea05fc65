// Package names holds every name the driver owns: its provisioner name, the
// finalizer, labels and annotations on placeholders and Services, and the
// pure functions that derive object names (pool, address, placeholder).
package names

import "strings"

// Provisioner is the driver's name in IPAddressClass.spec.provisioner and in
// the core's provisioner stamp on claims.
const Provisioner = "metallb.drivers.local.sdn.cozystack.io"

// Domain prefixes every label, annotation and finalizer the driver writes.
const Domain = Provisioner + "/"

const (
	// Finalizer is the driver's teardown finalizer on the IPAddresses it
	// serves: it releases the MetalLB allocation before the object goes.
	Finalizer = Domain + "teardown"

	// LabelWarm marks an IPAddress the driver recorded as a warm
	// reservation of its class (value "true"). Only such addresses are
	// deleted when the class asks for fewer warm addresses.
	LabelWarm = Domain + "warm"

	// LabelPlaceholder marks a placeholder Service. Its value is the
	// placeholder's role (PlaceholderAllocation, PlaceholderWarm or PlaceholderHold).
	LabelPlaceholder = Domain + "placeholder"
	// LabelAddress names the IPAddress a placeholder holds (or will hold).
	LabelAddress = Domain + "ipaddress"
	// LabelClaimUID carries the uid of the claim an allocation placeholder
	// serves, so placeholders can be found by claim through an index.
	LabelClaimUID = Domain + "claim-uid"

	// AnnotationClaimNamespace, AnnotationClaimName and AnnotationFamily
	// record, on an allocation placeholder, which claim and family it serves.
	AnnotationClaimNamespace = Domain + "claim-namespace"
	AnnotationClaimName      = Domain + "claim-name"
	AnnotationFamily         = Domain + "family"
	// AnnotationClass records the class whose pool the placeholder draws from.
	AnnotationClass = Domain + "class"

	// AnnotationPinnedBy is the authorship marker: present on a Service whose
	// MetalLB pin the driver wrote. The driver withdraws only such pins.
	// Its value is the claim the pin came from.
	AnnotationPinnedBy = Domain + "pinned-by"
	// AnnotationSharedBy is the second authorship marker: present on a
	// Service whose metallb.io/allow-shared-ip the driver wrote, so that it
	// may share its addresses with their placeholders during a handoff. The
	// driver withdraws only such keys. Its value is the claim the key came
	// from.
	AnnotationSharedBy = Domain + "shared-by"

	// LabelGrant is the grant label. Its value is the name of the class
	// whose pool MetalLB may give the Service an address from: each class
	// pool admits only Services carrying it (GrantSelector), even for an
	// address a Service asks for by pin. The driver sets it on its
	// placeholders and on the Service it attaches, and removes it on detach;
	// the chart's admission policy reserves it to the driver.
	LabelGrant = Domain + "grant"

	// AnnotationAttaching, on an IPAddress, names the Service
	// ("<namespace>/<name>") the Service controller granted the right to
	// attach the address. It is written with an optimistic lock before any
	// pin, so of two Services naming one claim at the same instant exactly
	// one gets it; status.associatedTo follows later in the handoff.
	AnnotationAttaching = Domain + "attaching"
)

// Placeholder roles, the values of LabelPlaceholder.
const (
	// PlaceholderAllocation draws a fresh address from the class pool for a claim.
	PlaceholderAllocation = "allocation"
	// PlaceholderHold keeps an existing address reserved while it is not attached.
	PlaceholderHold = "hold"
	// PlaceholderWarm draws a fresh address from the class pool for no
	// claim yet: a warm reservation, recorded as an Available IPAddress.
	PlaceholderWarm = "warm"
)

// MetalLB's annotations the driver writes or reads.
const (
	MetalLBAddressPool     = "metallb.io/address-pool"
	MetalLBLoadBalancerIPs = "metallb.io/loadBalancerIPs"
	MetalLBAllowSharedIP   = "metallb.io/allow-shared-ip"

	// MetalLBLegacyAllowSharedIP is the deprecated spelling of
	// MetalLBAllowSharedIP, which MetalLB still reads when the current one
	// is absent. The driver never writes it.
	MetalLBLegacyAllowSharedIP = "metallb.universe.tf/allow-shared-ip"
	// MetalLBLegacyLoadBalancerIPs is the deprecated spelling of
	// MetalLBLoadBalancerIPs, which MetalLB still reads. The driver never
	// writes it.
	MetalLBLegacyLoadBalancerIPs = "metallb.universe.tf/loadBalancerIPs"
	// MetalLBLegacyAddressPool is the deprecated spelling of
	// MetalLBAddressPool, which MetalLB still reads.
	MetalLBLegacyAddressPool = "metallb.universe.tf/address-pool"
)

// LeaseID is the leader-election lease of one controller binary.
func LeaseID(controller string) string { return "metallb-iad-" + controller }

// PoolName is the MetalLB IPAddressPool (and advertisement) rendered for a class.
func PoolName(class string) string { return "iad-" + class }

// SplitIPs parses a comma-separated list of IPs (the metallb.io/loadBalancerIPs
// format) into canonical forms, skipping what does not parse.
func SplitIPs(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if ip, err := ParseAddress(f); err == nil {
			out = append(out, ip.String())
		}
	}
	return out
}
