package marks

import (
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PlaceholderClaim is the claim an allocation placeholder's annotations
// name (AnnotationClaimNamespace, AnnotationClaimName).
func PlaceholderClaim(o client.Object) (types.NamespacedName, bool) {
	ns, name := o.GetAnnotations()[AnnotationClaimNamespace], o.GetAnnotations()[AnnotationClaimName]
	if ns == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}
