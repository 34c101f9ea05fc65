package marks

import (
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WithGrant makes a rendered pool admit only the Services the driver
// granted it to: serviceAllocation.serviceSelectors holds the grant
// selector of the class alone. MetalLB checks it for every assignment,
// also of an address a Service asks for by pin, and for every assignment
// it already made when it processes the Service again.
func WithGrant(pool *metallbv1beta1.IPAddressPool, class string) {
	pool.Spec.AllocateTo = &metallbv1beta1.ServiceAllocation{
		ServiceSelectors: []metav1.LabelSelector{GrantSelector(class)},
	}
}

// RequiresGrant reports whether a pool admits only Services carrying the
// class's grant label.
func RequiresGrant(pool *metallbv1beta1.IPAddressPool, class string) bool {
	if pool == nil || pool.Spec.AllocateTo == nil {
		return false
	}
	want := GrantSelector(class)
	for _, s := range pool.Spec.AllocateTo.ServiceSelectors {
		if equality.Semantic.DeepEqual(s, want) {
			return true
		}
	}
	return false
}
