package claim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

func TestServed(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name   string
		mutate func(c *iadv1alpha1.IPAddressClaim)
		want   bool
	}{
		{"stamped for us", func(*iadv1alpha1.IPAddressClaim) {}, true},
		{"no stamp", func(c *iadv1alpha1.IPAddressClaim) { c.Annotations = nil }, false},
		{"another provisioner", func(c *iadv1alpha1.IPAddressClaim) {
			c.Annotations[iadv1alpha1.ProvisionerAnnotation] = "other.example.org"
		}, false},
		{"being deleted", func(c *iadv1alpha1.IPAddressClaim) { c.DeletionTimestamp = &now }, false},
		{"asks for a named address", func(c *iadv1alpha1.IPAddressClaim) { c.Spec.AddressName = "ip-192-0-2-1" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testClaim(iadv1alpha1.FamilyIPv4)
			tt.mutate(c)
			assert.Equal(t, tt.want, served(c))
		})
	}
}

func TestClassName(t *testing.T) {
	c := testClaim(iadv1alpha1.FamilyIPv4)
	assert.Equal(t, "public", className(c), "spec when status is empty")
	c.Status.ClassName = "resolved"
	assert.Equal(t, "public", className(c), "spec wins, as in the core: a claim retargeted before binding names its new class")
	c.Spec.ClassName = ""
	assert.Equal(t, "resolved", className(c), "the sticky status when the spec names none (the default class)")
	c.Spec.ClassName, c.Status.ClassName = "", ""
	assert.Equal(t, "", className(c), "never resolves a default itself")
}

func TestClassProblem(t *testing.T) {
	ours := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"},
		Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: names.Provisioner}}
	theirs := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "cloud"},
		Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: "cloud.example.org"}}
	assert.Empty(t, classProblem("public", ours))
	assert.Equal(t, `IPAddressClass "cloud" is served by provisioner "cloud.example.org", not by metallb.drivers.local.sdn.cozystack.io; this driver does not provision it`,
		classProblem("cloud", theirs))
	assert.Equal(t, `IPAddressClass "gone" does not exist; the claim waits until it is created`, classProblem("gone", nil))
}
