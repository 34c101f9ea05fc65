package ipaddress

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/names"
)

// importingHolder returns the Service the address is being imported from,
// when the import is under way: the address is not associated yet, and a
// Service in the claim's namespace, outside the placeholder namespace,
// holds its IP while naming the address's claim both in the claim
// annotation and in the driver's imported-into marker (the service
// controller writes both before it creates the address). Such an address
// gets no hold placeholder: the Service holds it, and the service
// controller associates it right after. nil otherwise.
func importingHolder(a *iadv1alpha1.IPAddress, ip, placeholderNamespace string, holders []corev1.Service) *corev1.Service {
	ref := a.Spec.ClaimRef
	if a.Status.AssociatedTo != nil || ref == nil || ref.Name == "" || a.Labels[names.LabelImported] != "true" {
		return nil
	}
	for i := range holders {
		s := &holders[i]
		if s.Namespace != ref.Namespace || s.Namespace == placeholderNamespace || s.DeletionTimestamp != nil {
			continue
		}
		if s.Annotations[names.AnnotationImportedInto] == ref.Name &&
			s.Annotations[iadv1alpha1.ServiceClaimAnnotation] == ref.Name && binding.Holds(s, ip) {
			return s
		}
	}
	return nil
}

func msgImporting(ip string, s *corev1.Service) string {
	return fmt.Sprintf("Service %s/%s holds %s and is being imported into the address's claim; it keeps the address, so no placeholder is created", s.Namespace, s.Name, ip)
}
