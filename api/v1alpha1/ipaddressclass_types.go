package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReclaimPolicy says what becomes of an address when its claim goes away.
// +kubebuilder:validation:Enum=Retain;Delete
type ReclaimPolicy string

const (
	// ReclaimRetain keeps the address (phase Released) after its claim is deleted.
	ReclaimRetain ReclaimPolicy = "Retain"
	// ReclaimDelete deletes the address, and the driver frees it, when its claim is deleted.
	ReclaimDelete ReclaimPolicy = "Delete"
)

// IPAddressClassSpec says which driver serves a class and how.
type IPAddressClassSpec struct {
	// provisioner is the name of the driver that provisions addresses of
	// this class. This driver answers to
	// "metallb.drivers.local.sdn.cozystack.io". It cannot change once set.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="provisioner is immutable"
	Provisioner string `json:"provisioner"`

	// reclaimPolicy is copied onto every address provisioned from this class.
	// +kubebuilder:default=Retain
	// +optional
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`

	// parameters configure the driver. Only the driver reads them; for this
	// driver they hold the address ranges, the advertisement mode and its
	// options.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	Parameters *apiextensionsv1.JSON `json:"parameters,omitempty"`
}

// IPAddressClass is a source of addresses and the driver that carves them,
// as a StorageClass is for volumes. The annotation
// ipaddressclass.local.sdn.cozystack.io/is-default-class: "true" makes a class
// the default for claims that name none.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Provisioner",type=string,JSONPath=`.spec.provisioner`
// +kubebuilder:printcolumn:name="ReclaimPolicy",type=string,JSONPath=`.spec.reclaimPolicy`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPAddressClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPAddressClassSpec `json:"spec,omitempty"`
}

// IPAddressClassList is a list of IPAddressClass.
// +kubebuilder:object:root=true
type IPAddressClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddressClass `json:"items"`
}

func init() {
	SchemeBuilder.Register(&IPAddressClass{}, &IPAddressClassList{})
}
