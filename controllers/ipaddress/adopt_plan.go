package ipaddress

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// importingHolder returns the Service the unattached address is being
// imported from: in the claim's namespace, it holds the IP and names the
// claim in both the claim annotation and the imported-into marker (the
// Service controller writes both before it creates the address, and
// associates it right after). Such an address gets no hold. nil otherwise.
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
		if marks.ImportedInto(s) == ref.Name && marks.ClaimOf(s) == ref.Name && marks.Holds(s, ip) {
			return s
		}
	}
	return nil
}
