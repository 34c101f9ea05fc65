package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPAddressPhase is where an address stands in its lifecycle.
// +kubebuilder:validation:Enum=Pending;Available;Bound;Released;Conflict;Lost
type IPAddressPhase string

const (
	// AddressPending: not yet usable (for example an unparsable address).
	AddressPending IPAddressPhase = "Pending"
	// AddressAvailable: no claimRef; any matching claim may take it. Core-owned.
	AddressAvailable IPAddressPhase = "Available"
	// AddressBound: claimRef names a live claim with the same uid. Core-owned.
	AddressBound IPAddressPhase = "Bound"
	// AddressReleased: the claim is gone and the policy was Retain. Core-owned.
	AddressReleased IPAddressPhase = "Released"
	// AddressConflict: a workload holds the address without the binding's
	// authority. Set and cleared by drivers.
	AddressConflict IPAddressPhase = "Conflict"
	// AddressLost: the backend no longer has the address. Set and cleared by drivers.
	AddressLost IPAddressPhase = "Lost"
)

// ClaimReference points from an address to the claim it is bound to.
type ClaimReference struct {
	// namespace of the claim.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// name of the claim.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// uid of the claim. A driver that creates the address already bound may
	// leave it empty; the core fills it in when it accepts the binding.
	// +optional
	UID string `json:"uid,omitempty"`
}

// FromClassSource marks an address taken from the class's own ranges, the
// driver being the allocator of record.
type FromClassSource struct{}

// ProviderReference names a reservation held by an external provider.
type ProviderReference struct {
	// id is the provider's stable handle for the reservation.
	// +kubebuilder:validation:MinLength=1
	ID string `json:"id"`
}

// IPAddressSource says where an address came from; exactly one member is set.
// +kubebuilder:validation:XValidation:rule="(has(self.fromClass) ? 1 : 0) + (has(self.providerRef) ? 1 : 0) == 1",message="exactly one of fromClass or providerRef must be set"
type IPAddressSource struct {
	// fromClass: the address was carved from the class's range.
	// +optional
	FromClass *FromClassSource `json:"fromClass,omitempty"`
	// providerRef: the address was adopted from a provider-side reservation.
	// +optional
	ProviderRef *ProviderReference `json:"providerRef,omitempty"`
}

// IPAddressSpec is the ledger entry: one address, its class and its binding.
type IPAddressSpec struct {
	// address is the IP in canonical text form ("192.0.2.7", "2001:db8::7").
	// It cannot change.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="address is immutable"
	Address string `json:"address"`

	// className is the class the address belongs to.
	// +kubebuilder:validation:MinLength=1
	ClassName string `json:"className"`

	// reclaimPolicy decides the address's fate when its claim is deleted.
	// +kubebuilder:default=Retain
	// +optional
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`

	// claimRef is the one authoritative record of a binding. A driver may
	// set it when it creates the address; otherwise the core sets it when it
	// matches the address to a claim.
	// +optional
	ClaimRef *ClaimReference `json:"claimRef,omitempty"`

	// source says whether the address came from the class's range or from a
	// provider-side reservation.
	Source IPAddressSource `json:"source"`
}

// WorkloadReference names the workload an address is announced for.
type WorkloadReference struct {
	// kind of the workload, "Service" for this driver.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// namespace of the workload.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// name of the workload.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// IPAddressStatus is what the core and the driver observe of an address.
type IPAddressStatus struct {
	// phase of the address. Available, Bound and Released are the core's;
	// Conflict and Lost are the driver's.
	// +optional
	Phase IPAddressPhase `json:"phase,omitempty"`

	// associatedTo is the workload the address is attached to; empty while
	// the address is only reserved. Only drivers write it.
	// +optional
	AssociatedTo *WorkloadReference `json:"associatedTo,omitempty"`

	// conditions are the latest observations about the address.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IPAddress is one concrete address the cluster owns: the ledger entry, as a
// PersistentVolume is for storage. Drivers (or admins, statically) create
// them; tenants never do.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.className`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="ClaimNamespace",type=string,JSONPath=`.spec.claimRef.namespace`
// +kubebuilder:printcolumn:name="Claim",type=string,JSONPath=`.spec.claimRef.name`
// +kubebuilder:printcolumn:name="AttachedTo",type=string,JSONPath=`.status.associatedTo.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPAddress struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPAddressSpec   `json:"spec,omitempty"`
	Status IPAddressStatus `json:"status,omitempty"`
}

// IPAddressList is a list of IPAddress.
// +kubebuilder:object:root=true
type IPAddressList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddress `json:"items"`
}

func init() {
	SchemeBuilder.Register(&IPAddress{}, &IPAddressList{})
}
