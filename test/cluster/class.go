package cluster

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// Class is an IPAddressClass of this driver's provisioner: name, reclaim
// policy and the raw JSON of its parameters (none when empty). The one
// place the test stacks build a class, so a change of the class's shape is
// made once.
func Class(name string, policy iadv1alpha1.ReclaimPolicy, params string) *iadv1alpha1.IPAddressClass {
	c := &iadv1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       iadv1alpha1.IPAddressClassSpec{Provisioner: names.Provisioner, ReclaimPolicy: policy},
	}
	if params != "" {
		c.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(params)}
	}
	return c
}
