package claim

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// The claim tests' objects: the claim tenant/web of class public, its
// addresses and placeholders.

const testUID = types.UID("3f6d3c38-5a0e-4a8c-9d2a-0d4b0c7e1f20")

func testClaim(family iadv1alpha1.IPFamily) *iadv1alpha1.IPAddressClaim {
	return &iadv1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   "tenant",
			Name:        "web",
			UID:         testUID,
			Annotations: map[string]string{iadv1alpha1.ProvisionerAnnotation: names.Provisioner},
		},
		Spec: iadv1alpha1.IPAddressClaimSpec{ClassName: "public", Family: family},
	}
}

func testAddress(name, ip string, ref *iadv1alpha1.ClaimReference) iadv1alpha1.IPAddress {
	return iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec:       iadv1alpha1.IPAddressSpec{Address: ip, ClassName: "public", ClaimRef: ref},
	}
}

func testPlaceholder(role, address string, ingress string, owners ...string) *corev1.Service {
	svc := draw.RenderPlaceholder("iad-system", testClaim(iadv1alpha1.FamilyIPv4), "public", iadv1alpha1.FamilyIPv4)
	svc.Labels[marks.LabelPlaceholder] = role
	if address != "" {
		svc.Labels[marks.LabelAddress] = address
	}
	if ingress != "" {
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ingress}}
	}
	for _, o := range owners {
		a := testAddress(o, "192.0.2.1", nil)
		svc.OwnerReferences = append(svc.OwnerReferences, placeholder.OwnerRef(&a))
	}
	return svc
}
