package ipaddress

import (
	"testing"

	"github.com/stretchr/testify/assert"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// TestServed: the rule checkServed applies (marks.Served), which internal/marks
// does not test itself.
func TestServed(t *testing.T) {
	ours := &iadv1alpha1.IPAddressClass{Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: names.Provisioner}}
	theirs := &iadv1alpha1.IPAddressClass{Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: "example.com/other"}}
	plain := address("a", "192.0.2.7")
	withFinalizer := address("a", "192.0.2.7")
	withFinalizer.Finalizers = []string{iadv1alpha1.AddressProtectionFinalizer, names.Finalizer}

	assert.True(t, marks.Served(plain, ours), "class names us")
	assert.False(t, marks.Served(plain, theirs), "class names another driver")
	assert.False(t, marks.Served(withFinalizer, theirs), "class names another driver, even with our finalizer")
	assert.False(t, marks.Served(plain, nil), "class gone, never ours")
	assert.True(t, marks.Served(withFinalizer, nil), "class gone, still carries our finalizer")
}
