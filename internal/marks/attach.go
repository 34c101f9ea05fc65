package marks

import (
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// The attach grant on an IPAddress (AnnotationAttaching).

// Attaching is the attach grant's value; "" when there is none.
func Attaching(a *iadv1alpha1.IPAddress) string { return a.Annotations[AnnotationAttaching] }

// AttachingService is the Service the attach grant names; ok is false when
// there is no grant or it does not parse.
func AttachingService(a *iadv1alpha1.IPAddress) (svc types.NamespacedName, ok bool) {
	ns, name, ok := strings.Cut(Attaching(a), "/")
	return types.NamespacedName{Namespace: ns, Name: name}, ok
}

// GrantAttach writes the attach grant for the Service namespace/name.
func GrantAttach(a *iadv1alpha1.IPAddress, namespace, name string) {
	a.Annotations = maps.Clone(a.Annotations)
	if a.Annotations == nil {
		a.Annotations = map[string]string{}
	}
	a.Annotations[AnnotationAttaching] = namespace + "/" + name
}
