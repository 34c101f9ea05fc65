package claim

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// namespaceHolds counts the class's addresses namespace ns holds or draws
// for its claims other than except, one per claim and family: the claims'
// addresses (not Released, Lost or being deleted), the allocation
// placeholders drawing for them, and their draws in the book younger than
// InflightMax. An address being recorded shows as both a placeholder and
// an entry, and counts once.
func namespaceHolds(ns, except string, addrs []iadv1alpha1.IPAddress, phs []corev1.Service, book map[string]draw.InFlightDraw, now time.Time) int {
	units := map[string]bool{}
	add := func(claim, family string) {
		if claim != except {
			units[claim+"/"+family] = true
		}
	}
	for i := range addrs {
		a := &addrs[i]
		if a.Spec.ClaimRef == nil || a.Spec.ClaimRef.Namespace != ns || a.DeletionTimestamp != nil ||
			a.Status.Phase == iadv1alpha1.AddressReleased || a.Status.Phase == iadv1alpha1.AddressLost {
			continue
		}
		add(a.Spec.ClaimRef.Name, string(names.AddressFamily(a.Spec.Address)))
	}
	for i := range phs {
		an := phs[i].Annotations
		if phs[i].DeletionTimestamp != nil || an[marks.AnnotationClaimNamespace] != ns || an[marks.AnnotationClaimName] == "" {
			continue
		}
		add(an[marks.AnnotationClaimName], an[marks.AnnotationFamily])
	}
	for _, d := range book {
		if d.Claim.Namespace == ns && now.Sub(d.Since) < draw.InflightMax {
			add(d.Claim.Name, string(d.F))
		}
	}
	return len(units)
}

// overBound reports whether a claim of families addresses would take its
// namespace, holding others of the class's addresses for its other claims,
// past bound: a Dual claim takes both of its addresses or none.
func overBound(others, families int, bound int32) bool {
	return others+families > int(bound)
}
