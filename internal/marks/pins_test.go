package marks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPinValue(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want string
	}{
		{"one v4", []string{"203.0.113.7"}, "203.0.113.7"},
		{"v4 before v6", []string{"2001:db8::7", "203.0.113.7"}, "203.0.113.7,2001:db8::7"},
		{"already ordered", []string{"203.0.113.7", "2001:db8::7"}, "203.0.113.7,2001:db8::7"},
		{"canonical v6", []string{"2001:DB8:0:0:0:0:0:7", " 192.0.2.1 "}, "192.0.2.1,2001:db8::7"},
		{"v4-mapped is v4", []string{"::ffff:192.0.2.1", "2001:db8::1"}, "192.0.2.1,2001:db8::1"},
		{"numeric order within a family", []string{"192.0.2.10", "192.0.2.9"}, "192.0.2.9,192.0.2.10"},
		{"duplicates dropped", []string{"192.0.2.1", "192.0.2.1"}, "192.0.2.1"},
		{"garbage dropped", []string{"nope", "192.0.2.1", ""}, "192.0.2.1"},
		{"nothing", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, PinValue(tt.in))
		})
	}
}

func TestHandPin(t *testing.T) {
	s := func(ann map[string]string, lbIP string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: ann}, Spec: corev1.ServiceSpec{LoadBalancerIP: lbIP}}
	}
	assert.Equal(t, "", Of(s(nil, "")).HandPin())
	assert.Equal(t, "", Of(s(map[string]string{KeyPin: "192.0.2.1", KeyPinnedBy: "ip"}, "")).HandPin(), "ours")
	assert.Equal(t, "192.0.2.1,2001:db8::1", Of(s(map[string]string{KeyPin: "2001:db8::1, 192.0.2.1"}, "")).HandPin())
	assert.Equal(t, "192.0.2.2", Of(s(map[string]string{KeyLegacyPin: "192.0.2.2"}, "")).HandPin())
	assert.Equal(t, "192.0.2.3", Of(s(nil, "192.0.2.3")).HandPin())
	assert.Equal(t, "not-an-ip", Of(s(map[string]string{KeyPin: "not-an-ip"}, "")).HandPin(), "kept as written")
}

func TestReleaseByGrant(t *testing.T) {
	in := map[string]string{
		KeyPin:      "192.0.2.1",
		KeyPinnedBy: "web-ip",
		KeySharing:  "k",
		KeySharedBy: "web-ip",
		"team":      "web",
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: in, Labels: map[string]string{LabelGrant: "public", "app": "web"}}}
	assert.False(t, Of(svc).ReleaseStarted(""))
	byGrant := svc.DeepCopy()
	Edit(byGrant, func(m *Marks) {
		m.Release("")
		m.Grant = ""
	})
	assert.Equal(t, map[string]string{KeyPinnedBy: "web-ip", "team": "web"}, byGrant.Annotations,
		"pin and key withdrawn, the marker stays until MetalLB lets go")
	assert.Equal(t, map[string]string{"app": "web"}, byGrant.Labels)
	assert.Equal(t, "192.0.2.1", in[KeyPin], "input untouched")
	assert.True(t, Of(byGrant).ReleaseStarted(""))
	assert.False(t, Of(byGrant).ReleaseStarted("::"))
	byPin := svc.DeepCopy()
	Edit(byPin, func(m *Marks) { m.Release("::") })
	assert.Equal(t, "::", byPin.Annotations[KeyPin])
	assert.True(t, Of(byPin).ReleaseStarted("::"))
}
