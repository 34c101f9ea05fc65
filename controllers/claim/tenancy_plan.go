package claim

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// namespaceHolds counts the class's addresses namespace ns holds or draws,
// one per claim and family: its claims' addresses (not Released, Lost or
// being deleted), the allocation placeholders drawing for its claims, and
// its draws in the book younger than inflightMax. An address being
// recorded shows as both a placeholder and an entry, and counts once.
func namespaceHolds(ns string, addrs []iadv1alpha1.IPAddress, phs []corev1.Service, book map[string]inflightDraw, now time.Time) int {
	units := map[string]bool{}
	for i := range addrs {
		a := &addrs[i]
		if a.Spec.ClaimRef == nil || a.Spec.ClaimRef.Namespace != ns || a.DeletionTimestamp != nil ||
			a.Status.Phase == iadv1alpha1.AddressReleased || a.Status.Phase == iadv1alpha1.AddressLost {
			continue
		}
		units[a.Spec.ClaimRef.Name+"/"+string(addressFamily(a.Spec.Address))] = true
	}
	for i := range phs {
		an := phs[i].Annotations
		if phs[i].DeletionTimestamp != nil || an[names.AnnotationClaimNamespace] != ns || an[names.AnnotationClaimName] == "" {
			continue
		}
		units[an[names.AnnotationClaimName]+"/"+an[names.AnnotationFamily]] = true
	}
	for _, d := range book {
		if d.claim.Namespace == ns && now.Sub(d.since) < inflightMax {
			units[d.claim.Name+"/"+string(d.f)] = true
		}
	}
	return len(units)
}
