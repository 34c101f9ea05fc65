package v1alpha1

// Names the core defines (see the core contract). The driver reads them;
// it writes none of the core-owned ones.
const (
	// ProvisionerAnnotation is stamped on a claim by the core with the
	// provisioner of its resolved class. It is the driver's watch key.
	ProvisionerAnnotation = "local.sdn.cozystack.io/provisioner"

	// ServiceClaimAnnotation is set by a tenant on a Service to attach the
	// named claim (in the Service's own namespace) to it.
	ServiceClaimAnnotation = "local.sdn.cozystack.io/ip-address-claim"

	// DefaultClassAnnotation marks the default IPAddressClass when "true".
	DefaultClassAnnotation = "ipaddressclass.local.sdn.cozystack.io/is-default-class"

	// ClaimProtectionFinalizer is the core's finalizer on claims.
	ClaimProtectionFinalizer = "local.sdn.cozystack.io/claim-protection"

	// AddressProtectionFinalizer is the core's finalizer on addresses.
	AddressProtectionFinalizer = "local.sdn.cozystack.io/address-protection"
)

// Condition types and reasons the core sets on claims.
const (
	// ClaimConditionClassResolved reports whether the claim's class was found.
	ClaimConditionClassResolved = "ClassResolved"
	// ClaimConditionBound reports whether every family of the claim is bound.
	ClaimConditionBound = "Bound"

	ReasonResolved               = "Resolved"
	ReasonClassNotFound          = "ClassNotFound"
	ReasonNoDefaultClass         = "NoDefaultClass"
	ReasonMultipleDefaultClasses = "MultipleDefaultClasses"
	ReasonBound                  = "Bound"
	ReasonWaitingForProvisioning = "WaitingForProvisioning"
	ReasonAddressLost            = "AddressLost"
)
