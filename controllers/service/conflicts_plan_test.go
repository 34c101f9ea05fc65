package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
)

func TestClassOfIP(t *testing.T) {
	classes := []classRanges{
		{name: "a", ranges: mustRanges(t, "192.0.2.0/28", "2001:db8::/120")},
		{name: "b", ranges: mustRanges(t, "198.51.100.10-198.51.100.20")},
	}
	for ip, want := range map[string]string{
		"192.0.2.0": "a", "192.0.2.15": "a", "192.0.2.16": "", "2001:db8::ff": "a", "2001:db8::100": "",
		"198.51.100.10": "b", "198.51.100.20": "b", "198.51.100.21": "", "::ffff:192.0.2.1": "a", "garbage": "",
	} {
		assert.Equal(t, want, classOfIP(classes, ip), ip)
	}
}

func mustRanges(t *testing.T, in ...string) []classparams.AddressRange {
	t.Helper()
	var out []classparams.AddressRange
	for _, s := range in {
		r, err := classparams.ParseAddressRange(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestConflicting(t *testing.T) {
	now := metav1.Now()
	web := annotatedService("tenant", "web")
	mine := address("tenant", "ip", &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant", Name: "web"})
	other := address("tenant", "ip", nil)
	lost := address("tenant", "ip", nil)
	lost.Status.Phase = iadv1alpha1.AddressLost
	leaving := address("tenant", "ip", nil)
	leaving.DeletionTimestamp = &now
	assert.False(t, conflicting(web, mine), "authorized")
	assert.True(t, conflicting(web, other), "not authorized")
	assert.False(t, conflicting(web, lost), "Lost: the IPAddress controller reports it")
	assert.False(t, conflicting(web, leaving), "being deleted: leaving the ledger")
}
