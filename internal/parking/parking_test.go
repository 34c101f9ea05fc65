package parking

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pool(addresses ...string) *metallbv1beta1.IPAddressPool {
	return &metallbv1beta1.IPAddressPool{Spec: metallbv1beta1.IPAddressPoolSpec{Addresses: addresses}}
}

func TestServes(t *testing.T) {
	v4, v6, mapped := netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("2001:db8::7"), netip.MustParseAddr("::ffff:192.0.2.7")
	deleting := pool("240.0.0.0/16", "100::/112")
	deleting.DeletionTimestamp = &metav1.Time{}
	tests := []struct {
		name     string
		pool     *metallbv1beta1.IPAddressPool
		v4, v6   bool
		mappedV4 bool
	}{
		{"no pool", nil, false, false, false},
		{"both families", pool("240.0.0.0/16", "100::/112"), true, true, true},
		{"IPv4 only, as a range", pool("240.0.0.1-240.0.0.9"), true, false, true},
		{"IPv6 only", pool("100::/112"), false, true, false},
		{"nothing that parses", pool("nonsense"), false, false, false},
		{"being deleted", deleting, false, false, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.v4, Serves(tt.pool, v4), tt.name+": IPv4")
		assert.Equal(t, tt.v6, Serves(tt.pool, v6), tt.name+": IPv6")
		assert.Equal(t, tt.mappedV4, Serves(tt.pool, mapped), tt.name+": IPv4-mapped")
		assert.Equal(t, tt.v4 && tt.v6, ServesAll(tt.pool, []netip.Addr{v4, v6}), tt.name+": both")
	}
	assert.False(t, ServesAll(pool("240.0.0.0/16"), nil), "no address: nothing to park")
}
