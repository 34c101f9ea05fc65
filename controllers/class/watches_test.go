package class

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// TestLedgerEntryChanged: the IPAddress changes that re-queue the class are
// those that change what a class change drops or what its refusal says:
// status changes that say nothing of either (phase, conditions) do not.
func TestLedgerEntryChanged(t *testing.T) {
	base := func() *iadv1alpha1.IPAddress {
		return &iadv1alpha1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Name: "ip-192-0-2-1"},
			Spec: iadv1alpha1.IPAddressSpec{Address: "192.0.2.1", ClassName: "gold",
				ClaimRef: &iadv1alpha1.ClaimReference{Namespace: "t", Name: "ip"}},
		}
	}
	now := metav1.Now()
	for name, tc := range map[string]struct {
		mut  func(*iadv1alpha1.IPAddress)
		want bool
	}{
		"nothing":         {func(*iadv1alpha1.IPAddress) {}, false},
		"phase":           {func(a *iadv1alpha1.IPAddress) { a.Status.Phase = iadv1alpha1.AddressBound }, false},
		"deletion starts": {func(a *iadv1alpha1.IPAddress) { a.DeletionTimestamp = &now }, true},
		"other class":     {func(a *iadv1alpha1.IPAddress) { a.Spec.ClassName = "silver" }, true},
		"other claim":     {func(a *iadv1alpha1.IPAddress) { a.Spec.ClaimRef.Name = "other" }, true},
		"claim released":  {func(a *iadv1alpha1.IPAddress) { a.Spec.ClaimRef = nil }, true},
		"attached": {func(a *iadv1alpha1.IPAddress) {
			a.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "t", Name: "web"}
		}, true},
	} {
		n := base()
		tc.mut(n)
		assert.Equal(t, tc.want, ledgerEntryChanged(base(), n), name)
	}
	attached := base()
	attached.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "t", Name: "web"}
	assert.True(t, ledgerEntryChanged(attached, base()), "detached")
}
