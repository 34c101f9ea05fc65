package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPFamily is the address family a claim asks for.
// +kubebuilder:validation:Enum=IPv4;IPv6;Dual
type IPFamily string

const (
	// FamilyIPv4 asks for one IPv4 address.
	FamilyIPv4 IPFamily = "IPv4"
	// FamilyIPv6 asks for one IPv6 address.
	FamilyIPv6 IPFamily = "IPv6"
	// FamilyDual asks for one IPv4 and one IPv6 address.
	FamilyDual IPFamily = "Dual"
)

// Families expands a claim family into the single-stack families it needs,
// IPv4 first.
func (f IPFamily) Families() []IPFamily {
	switch f {
	case FamilyDual:
		return []IPFamily{FamilyIPv4, FamilyIPv6}
	case FamilyIPv6:
		return []IPFamily{FamilyIPv6}
	default:
		return []IPFamily{FamilyIPv4}
	}
}

// IPAddressClaimPhase is where a claim stands.
// +kubebuilder:validation:Enum=Pending;Bound;Lost
type IPAddressClaimPhase string

const (
	// ClaimPending: at least one family is not bound yet.
	ClaimPending IPAddressClaimPhase = "Pending"
	// ClaimBound: every family the claim asks for is bound.
	ClaimBound IPAddressClaimPhase = "Bound"
	// ClaimLost: a bound address went Lost.
	ClaimLost IPAddressClaimPhase = "Lost"
)

// IPAddressClaimSpec is what a tenant asks for.
type IPAddressClaimSpec struct {
	// className is the class to draw from; empty means the default class.
	// +optional
	ClassName string `json:"className,omitempty"`

	// family of the address: IPv4, IPv6, or Dual for one of each.
	// +kubebuilder:default=IPv4
	// +optional
	Family IPFamily `json:"family,omitempty"`

	// addressName binds the claim to one named Available address instead of
	// a newly provisioned one. Single-family claims only.
	// +optional
	AddressName string `json:"addressName,omitempty"`
}

// ClaimedAddress is one address bound to a claim.
type ClaimedAddress struct {
	// name of the IPAddress object.
	Name string `json:"name"`
	// address is the IP itself, the value a tenant configures.
	Address string `json:"address"`
}

// IPAddressClaimStatus is what the core reports about a claim.
type IPAddressClaimStatus struct {
	// phase of the claim.
	// +optional
	Phase IPAddressClaimPhase `json:"phase,omitempty"`

	// className is the class the claim resolved to; once set it sticks.
	// +optional
	ClassName string `json:"className,omitempty"`

	// addresses bound to the claim, sorted by object name (two for Dual).
	// +optional
	Addresses []ClaimedAddress `json:"addresses,omitempty"`

	// conditions are the latest observations about the claim.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IPAddressClaim is a tenant's request for an address, as a
// PersistentVolumeClaim is for storage.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.status.className`
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=`.status.addresses[*].address`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPAddressClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPAddressClaimSpec   `json:"spec,omitempty"`
	Status IPAddressClaimStatus `json:"status,omitempty"`
}

// IPAddressClaimList is a list of IPAddressClaim.
// +kubebuilder:object:root=true
type IPAddressClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddressClaim `json:"items"`
}

func init() {
	SchemeBuilder.Register(&IPAddressClaim{}, &IPAddressClaimList{})
}
