package ipaddress

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/names"
)

func TestPoolContains(t *testing.T) {
	tests := []struct {
		entries []string
		ip      string
		want    bool
	}{
		{[]string{"192.0.2.0/30"}, "192.0.2.3", true},
		{[]string{"192.0.2.0/30"}, "192.0.2.4", false},
		{[]string{"192.0.2.1/30"}, "192.0.2.0", true}, // host bits, read as the network
		{[]string{"192.0.2.10-192.0.2.20"}, "192.0.2.20", true},
		{[]string{"192.0.2.10 - 192.0.2.20"}, "192.0.2.9", false},
		{[]string{"2001:db8::/126"}, "2001:db8::3", true},
		{[]string{"2001:db8::1-2001:db8::5"}, "2001:db8::5", true},
		{[]string{"192.0.2.0/24"}, "2001:db8::1", false},
		{[]string{"::ffff:192.0.2.0-::ffff:192.0.2.9"}, "192.0.2.1", true},
		{[]string{"nonsense", "198.51.100.7/32"}, "198.51.100.7", true},
		{nil, "192.0.2.1", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, poolContains(tt.entries, netip.MustParseAddr(tt.ip)), "%v contains %s", tt.entries, tt.ip)
	}
}

func TestLostCause(t *testing.T) {
	ip := netip.MustParseAddr("192.0.2.1")
	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: names.Provisioner}}
	deletingClass := class.DeepCopy()
	deletingClass.DeletionTimestamp = ptr.To(metav1.Now())
	pool := func(addrs ...string) *metallbv1beta1.IPAddressPool {
		return &metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-system", Name: "iad-gold"},
			Spec: metallbv1beta1.IPAddressPoolSpec{Addresses: addrs}}
	}
	deletingPool := pool("192.0.2.0/30")
	deletingPool.DeletionTimestamp = ptr.To(metav1.Now())

	tests := []struct {
		name   string
		class  *iadv1alpha1.IPAddressClass
		pool   *metallbv1beta1.IPAddressPool
		reason string
		msg    string
	}{
		{"in the pool", class, pool("192.0.2.0/30"), "", ""},
		{"class gone, its pool kept for the address", nil, pool("192.0.2.1/32"), "", ""},
		{"class being deleted, its pool kept", deletingClass, pool("192.0.2.0/30"), "", ""},
		{"class gone and its pool too", nil, nil, conditions.ReasonClassDeleted,
			"IPAddressClass gold was deleted and IPAddressPool metallb-system/iad-gold does not exist: MetalLB no longer has 192.0.2.1 and took it from whoever held it. " +
				"The address comes back with the same IP when a class of that name serves a range containing it again"},
		{"class gone, its pool narrowed to other addresses", nil, pool("192.0.2.2/32"), conditions.ReasonOutsidePool, ""},
		{"pool gone", class, nil, conditions.ReasonPoolMissing,
			"IPAddressPool metallb-system/iad-gold does not exist: MetalLB no longer has 192.0.2.1 and took it from whoever held it. " +
				"The address comes back with the same IP when the pool is rendered again"},
		{"pool being deleted", class, deletingPool, conditions.ReasonPoolMissing, ""},
		{"pool edited", class, pool("192.0.2.8/30", "192.0.2.20-192.0.2.21"), conditions.ReasonOutsidePool,
			"IPAddressPool metallb-system/iad-gold (192.0.2.8/30, 192.0.2.20-192.0.2.21) does not contain 192.0.2.1: MetalLB took it from whoever held it. " +
				"The address comes back with the same IP when the pool contains it again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, msg := lostCause("gold", tt.class, tt.pool, "metallb-system", ip)
			assert.Equal(t, tt.reason, reason)
			if tt.msg != "" || tt.reason == "" {
				assert.Equal(t, tt.msg, msg)
			}
		})
	}
}

func TestSaidSince(t *testing.T) {
	lost := time.Date(2026, 1, 1, 12, 0, 5, 0, time.UTC)
	ev := func(uid, reason string, at time.Time) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{UID: types.UID(uid)}, Reason: reason, LastTimestamp: metav1.NewTime(at)}
	}
	later := lost.Add(time.Second)
	evs := []corev1.Event{ev("a", ReasonAddressLost, later), ev("b", ReasonAddressRecovered, later), ev("d", ReasonAddressLost, lost.Add(-time.Minute))}
	assert.True(t, saidSince(evs, "a", ReasonAddressLost, lost))
	assert.False(t, saidSince(evs, "b", ReasonAddressLost, lost), "another reason")
	assert.False(t, saidSince(evs, "c", ReasonAddressLost, lost), "an older address of the same name")
	assert.False(t, saidSince(evs, "d", ReasonAddressLost, lost), "said about an earlier time the address went Lost")
	assert.False(t, saidSince([]corev1.Event{ev("a", ReasonAddressLost, lost)}, "a", ReasonAddressLost, lost), "in the same second: said again rather than not at all")
	assert.False(t, saidSince(nil, "a", ReasonAddressLost, lost))
}
