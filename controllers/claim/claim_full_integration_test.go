package claim

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// TestFullClassAsksMetalLBForNothing: once the ledger holds every address
// of a class's ranges, a further claim stays Pending with PoolExhausted and
// gets no allocation placeholder (MetalLB would fail it and never retry);
// when an address of the class is freed, the claim proceeds.
func TestFullClassAsksMetalLBForNothing(t *testing.T) {
	ns := namespace(t)
	cidr := "10.10.32.0/31"
	cl := &iadv1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "full-" + rand.String(6)},
		Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: names.Provisioner, ReclaimPolicy: iadv1alpha1.ReclaimDelete,
			Parameters: &apiextensionsv1.JSON{Raw: fmt.Appendf(nil, `{"addresses":[%q]}`, cidr)}},
	}
	require.NoError(t, k.Create(ctx, cl))
	t.Cleanup(func() { _ = k.Delete(ctx, cl) })
	pool(t, cl.Name, cidr)

	c1 := claim(t, ns, cl.Name, iadv1alpha1.FamilyIPv4, names.Provisioner)
	c2 := claim(t, ns, cl.Name, iadv1alpha1.FamilyIPv4, names.Provisioner)
	ph1, a1 := recorded(t, c1, iadv1alpha1.FamilyIPv4)
	recorded(t, c2, iadv1alpha1.FamilyIPv4)

	c3 := claim(t, ns, cl.Name, iadv1alpha1.FamilyIPv4, names.Provisioner)
	ev := eventually(t, c3, ReasonPoolExhausted)
	assert.Contains(t, ev.Message, "asks MetalLB for nothing")
	err := k.Get(ctx, placeholderKey(c3, iadv1alpha1.FamilyIPv4), &corev1.Service{})
	assert.True(t, apierrors.IsNotFound(err), "no allocation placeholder while the class is full: %v", err)

	// Free one address as deleting its claim would: the claim goes, its
	// hold goes, then the IPAddress.
	require.NoError(t, k.Delete(ctx, c1))
	require.NoError(t, k.Delete(ctx, ph1))
	deleteAddress(a1)
	ph3, a3 := recorded(t, c3, iadv1alpha1.FamilyIPv4)
	assert.Equal(t, a1.Spec.Address, a3.Spec.Address, "the freed address serves the waiting claim")
	assert.Equal(t, names.PlaceholderHold, ph3.Labels[names.LabelPlaceholder])
}
