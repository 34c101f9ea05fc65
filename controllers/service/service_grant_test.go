package service

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/names"
)

func TestReleaseByGrant(t *testing.T) {
	in := map[string]string{
		names.MetalLBLoadBalancerIPs: "192.0.2.1",
		names.AnnotationPinnedBy:     "web-ip",
		names.MetalLBAllowSharedIP:   "k",
		names.AnnotationSharedBy:     "web-ip",
		"team":                       "web",
	}
	out := binding.ReleaseAnnotations(in, "")
	assert.Equal(t, map[string]string{names.AnnotationPinnedBy: "web-ip", "team": "web"}, out,
		"pin and key withdrawn, the marker stays until MetalLB lets go")
	assert.Equal(t, "192.0.2.1", in[names.MetalLBLoadBalancerIPs], "input untouched")
	assert.Equal(t, "::", binding.ReleaseAnnotations(in, "::")[names.MetalLBLoadBalancerIPs])

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: in, Labels: map[string]string{names.LabelGrant: "public", "app": "web"}}}
	assert.False(t, ReleaseStarted(svc, ""))
	svc.Annotations, svc.Labels = out, UngrantedLabels(svc.Labels)
	assert.Equal(t, map[string]string{"app": "web"}, svc.Labels)
	assert.True(t, ReleaseStarted(svc, ""))
	assert.False(t, ReleaseStarted(svc, "::"))
	svc.Annotations = binding.ReleaseAnnotations(in, "::")
	assert.True(t, ReleaseStarted(svc, "::"))

	assert.Equal(t, map[string]string{"app": "web", names.LabelGrant: "public"}, GrantLabels(map[string]string{"app": "web"}, "public"))
	assert.Equal(t, map[string]string{names.LabelGrant: "public"}, GrantLabels(nil, "public"))
	assert.Nil(t, GrantLabels(nil, ""))
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
