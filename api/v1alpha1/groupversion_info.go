// Package v1alpha1 holds the address model's API types (group
// local.sdn.cozystack.io, version v1alpha1) as this driver sees them.
//
// The kinds belong to the core controller; the driver carries its own copy of
// the types so it can be built and tested without the core. The generated
// CRDs are structurally identical to the core's.
//
// +kubebuilder:object:generate=true
// +groupName=local.sdn.cozystack.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the address model.
	GroupVersion = schema.GroupVersion{Group: "local.sdn.cozystack.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
