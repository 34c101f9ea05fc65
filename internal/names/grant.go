package names

import (
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GrantSelector is the serviceAllocation.serviceSelectors entry of a class
// pool: only Services carrying the grant label with the class's name.
func GrantSelector(class string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{LabelGrant: class}}
}

// Granted reports whether a Service's labels grant it the class's pool.
func Granted(labels map[string]string, class string) bool {
	v, ok := labels[LabelGrant]
	return ok && v == class
}

// PoolRequiresGrant reports whether a pool admits only Services carrying
// the class's grant label.
func PoolRequiresGrant(pool *metallbv1beta1.IPAddressPool, class string) bool {
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
