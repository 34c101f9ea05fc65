package claim

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// The claim tests' objects: the claim tenant/web of class public, its
// addresses and placeholders.

// testPlaceholder is TenantClaim's IPv4 placeholder as the claim
// controller renders it, marked (fixture.MarkPlaceholder).
func testPlaceholder(role, address, ingress string, owners ...string) *corev1.Service {
	return fixture.MarkPlaceholder(draw.RenderPlaceholder("iad-system", testClaim(iadv1alpha1.FamilyIPv4), "public", iadv1alpha1.FamilyIPv4), role, address, ingress, owners...)
}

// The shared claim and addresses of the plan tests (test/fixture).
var (
	testUID     = fixture.ClaimUID
	testClaim   = fixture.TenantClaim
	testAddress = fixture.ClassAddress
)
