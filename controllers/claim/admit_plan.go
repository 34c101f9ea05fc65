package claim

import (
	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// served reports whether the claim is this driver's to provision: stamped
// for it, not being deleted, and not asking for a specific address (the
// core's matching path).
func served(c *iadv1alpha1.IPAddressClaim) bool {
	return c.Annotations[iadv1alpha1.ProvisionerAnnotation] == names.Provisioner &&
		c.DeletionTimestamp == nil &&
		c.Spec.AddressName == ""
}

// className is the claim's class in the core's order: spec.className, else
// the sticky status.className the core resolved; the driver never resolves
// defaults itself.
func className(c *iadv1alpha1.IPAddressClaim) string {
	if c.Spec.ClassName != "" {
		return c.Spec.ClassName
	}
	return c.Status.ClassName
}

// classProblem explains why a class (nil: missing) cannot serve a claim of
// this driver; "" when it can.
func classProblem(name string, class *iadv1alpha1.IPAddressClass) string {
	if class == nil {
		return msgClassMissing(name)
	}
	if class.Spec.Provisioner != names.Provisioner {
		return msgClassNotServed(name, class.Spec.Provisioner)
	}
	return ""
}
