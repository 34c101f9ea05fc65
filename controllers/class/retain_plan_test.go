package class

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
)

func TestRetained(t *testing.T) {
	addr := func(ip string) iadv1alpha1.IPAddress {
		return iadv1alpha1.IPAddress{Spec: iadv1alpha1.IPAddressSpec{Address: ip}}
	}
	tests := []struct {
		name  string
		pool  []string
		addrs []iadv1alpha1.IPAddress
		want  []string
	}{
		{"no address left", []string{"192.0.2.0/24"}, nil, []string{}},
		{"narrowed to the addresses, sorted, one entry each",
			[]string{"192.0.2.0/24", "2001:db8::1-2001:db8::ff"},
			[]iadv1alpha1.IPAddress{addr("2001:db8::7"), addr("192.0.2.9"), addr("192.0.2.3"), addr("192.0.2.9")},
			[]string{"192.0.2.3/32", "192.0.2.9/32", "2001:db8::7/128"}},
		{"an address the pool does not contain is not added back",
			[]string{"192.0.2.0/30"}, []iadv1alpha1.IPAddress{addr("192.0.2.1"), addr("198.51.100.1"), addr("not an ip")},
			[]string{"192.0.2.1/32"}},
		{"already narrowed: stays as it is", []string{"192.0.2.1/32"}, []iadv1alpha1.IPAddress{addr("192.0.2.1")}, []string{"192.0.2.1/32"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Retained(tt.pool, tt.addrs))
		})
	}
}

func TestPlanRetain(t *testing.T) {
	addr := func(ip string) iadv1alpha1.IPAddress {
		return iadv1alpha1.IPAddress{Spec: iadv1alpha1.IPAddressSpec{Address: ip}}
	}
	pool := func(avoidBuggy bool, note string, addrs ...string) *metallbv1beta1.IPAddressPool {
		p := &metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: "iad-gone"},
			Spec: metallbv1beta1.IPAddressPoolSpec{Addresses: addrs, AvoidBuggyIPs: avoidBuggy, AutoAssign: ptr.To(false)}}
		if note != "" {
			p.Annotations = map[string]string{marks.KeyRetained: note}
		}
		return p
	}
	one := []iadv1alpha1.IPAddress{addr("192.0.2.7")}
	note := RetainedMessage("gone", []string{"192.0.2.7/32"})
	for _, tc := range []struct {
		name         string
		pool         *metallbv1beta1.IPAddressPool
		addrs        []iadv1alpha1.IPAddress
		wantWithdraw bool
		want         *metallbv1beta1.IPAddressPool
	}{
		{"no pool of the class", nil, one, true, nil},
		{"no address left", pool(false, "", "192.0.2.0/24"), nil, true, nil},
		{"narrowed, buggy IPs served, noted", pool(true, "", "192.0.2.0/24"), one, false, pool(false, note, "192.0.2.7/32")},
		{"already narrowed", pool(false, note, "192.0.2.7/32"), one, false, nil},
		{"the note is written back", pool(false, "", "192.0.2.7/32"), one, false, pool(false, note, "192.0.2.7/32")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before *metallbv1beta1.IPAddressPool
			if tc.pool != nil {
				before = tc.pool.DeepCopy()
			}
			got, withdraw := planRetain("gone", tc.pool, tc.addrs)
			assert.Equal(t, tc.wantWithdraw, withdraw)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, before, tc.pool, "the pool read is not changed")
		})
	}
}
