package marks

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// The keys of every label, annotation and finalizer the driver reads or
// writes, on any object: the one place they are named
// (TestReadmeNamesEveryKey holds the README to them, TestKeysLiveInMarks
// keeps them here). The marks a Service carries are read and written
// through a Marks; the keys of the driver's own objects below are used
// where those objects are built and looked up.
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

// The driver's own objects: placeholders, the ledger's IPAddresses,
// imported claims, and the MetalLB objects a class renders.
const (
	// Finalizer makes an IPAddress wait for its MetalLB allocation's release.
	Finalizer = names.Domain + "teardown"

	// LabelWarm ("true") marks warm reservations, the only ones scaled down.
	LabelWarm = names.Domain + "warm"

	// LabelPlaceholder marks a placeholder Service; its value is the role.
	LabelPlaceholder = names.Domain + "placeholder"
	// LabelAddress names the IPAddress a placeholder holds (or will hold).
	LabelAddress = names.Domain + "ipaddress"
	// LabelClaimUID is the uid of the claim an allocation placeholder serves.
	LabelClaimUID = names.Domain + "claim-uid"

	// AnnotationClaimNamespace, AnnotationClaimName and AnnotationFamily
	// record, on an allocation placeholder, which claim and family it serves.
	AnnotationClaimNamespace = names.Domain + "claim-namespace"
	AnnotationClaimName      = names.Domain + "claim-name"
	AnnotationFamily         = names.Domain + "family"
	// KeyClass names a class: on a placeholder (an annotation), the class
	// whose pool it draws from; on a MetalLB object the class controller
	// rendered (a label), the class it serves.
	KeyClass = names.Domain + "class"
	// KeyRetained, on a pool whose class is gone, names the addresses
	// recorded under the class name that it keeps serving until released.
	KeyRetained = names.Domain + "retained-for"
	// LabelManagedBy is Kubernetes' well-known label; the class controller
	// sets it to "metallb-iad" on what it renders.
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// AnnotationAttaching, on an IPAddress, is the attach grant: it names,
	// as "namespace/name", the one Service allowed to attach the address
	// while the attach is under way; written locked before any pin, so one
	// of two racing Services wins.
	AnnotationAttaching = names.Domain + "attaching"

	// LabelImported ("true") marks the claims and IPAddresses generated to
	// import an address MetalLB had already assigned to a plain Service.
	LabelImported = names.Domain + "imported"
	// AnnotationImportedService and AnnotationImportedServiceUID record the
	// source Service; the uid tells the driver's claim from a tenant's namesake.
	AnnotationImportedService    = names.Domain + "imported-service"
	AnnotationImportedServiceUID = names.Domain + "imported-service-uid"
)

// Keys the driver reads on Services others write.
const (
	// LabelOwningGatewayName and LabelOwningGatewayNamespace are Envoy
	// Gateway's labels naming the Gateway a Service serves, which its
	// default mode creates in Envoy Gateway's own namespace; the
	// implementation writes them over anything the Gateway's
	// spec.infrastructure.labels say.
	LabelOwningGatewayName      = "gateway.envoyproxy.io/owning-gateway-name"
	LabelOwningGatewayNamespace = "gateway.envoyproxy.io/owning-gateway-namespace"
	// LabelOwningGatewayClass is Envoy Gateway's label on a Service that
	// serves every Gateway of a class (merged Gateways).
	LabelOwningGatewayClass = "gateway.envoyproxy.io/owning-gatewayclass"
	// LabelGatewayName is Gateway API's label naming the Gateway an
	// object was created for, in the object's own namespace (Contour's
	// gateway provisioner and Istio write it over the Gateway's
	// spec.infrastructure.labels).
	LabelGatewayName = "gateway.networking.k8s.io/gateway-name"
	// KeyLastApplied is kubectl's copy of what it applied, often a
	// Service's largest annotation: the Service cache drops it.
	KeyLastApplied = "kubectl.kubernetes.io/last-applied-configuration"
)
