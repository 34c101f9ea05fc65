package service

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/marks"
)

func TestReleaseByGrant(t *testing.T) {
	in := map[string]string{
		marks.KeyPin:      "192.0.2.1",
		marks.KeyPinnedBy: "web-ip",
		marks.KeySharing:  "k",
		marks.KeySharedBy: "web-ip",
		"team":            "web",
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: in, Labels: map[string]string{marks.LabelGrant: "public", "app": "web"}}}
	assert.False(t, marks.Of(svc).ReleaseStarted(""))
	byGrant := svc.DeepCopy()
	marks.Edit(byGrant, func(m *marks.Marks) {
		m.Release("")
		m.Grant = ""
	})
	assert.Equal(t, map[string]string{marks.KeyPinnedBy: "web-ip", "team": "web"}, byGrant.Annotations,
		"pin and key withdrawn, the marker stays until MetalLB lets go")
	assert.Equal(t, map[string]string{"app": "web"}, byGrant.Labels)
	assert.Equal(t, "192.0.2.1", in[marks.KeyPin], "input untouched")
	assert.True(t, marks.Of(byGrant).ReleaseStarted(""))
	assert.False(t, marks.Of(byGrant).ReleaseStarted("::"))
	byPin := svc.DeepCopy()
	marks.Edit(byPin, func(m *marks.Marks) { m.Release("::") })
	assert.Equal(t, "::", byPin.Annotations[marks.KeyPin])
	assert.True(t, marks.Of(byPin).ReleaseStarted("::"))
}

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

func TestUnauthorizedTracker(t *testing.T) {
	u := newUnauthorized()
	k1 := types.NamespacedName{Namespace: "t", Name: "s1"}
	k2 := types.NamespacedName{Namespace: "t", Name: "s2"}
	g := grab{Class: "track", IP: "192.0.2.1"}
	assert.Equal(t, []grab{g}, u.set(k1, []grab{g}), "new: reported")
	assert.Empty(t, u.set(k1, []grab{g}), "seen: not reported again")
	g2 := grab{Class: "track", IP: "192.0.2.2", Address: "ip-192-0-2-2"}
	assert.Equal(t, []grab{g2}, u.set(k2, []grab{g2}))
	assert.Equal(t, 2.0, gauge(t, "track"))
	u.set(k1, nil)
	assert.Equal(t, 1.0, gauge(t, "track"))
	u.set(k2, nil)
	assert.Equal(t, 0.0, gauge(t, "track"))
	assert.Equal(t, []grab{g}, u.set(k1, []grab{g}), "reported again once it came back")
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

func gauge(t *testing.T, class string) float64 {
	t.Helper()
	return testutil.ToFloat64(unauthorizedHolders.WithLabelValues(class))
}
