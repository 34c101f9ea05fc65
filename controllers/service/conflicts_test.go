package service

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

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

func gauge(t *testing.T, class string) float64 {
	t.Helper()
	return testutil.ToFloat64(unauthorizedHolders.WithLabelValues(class))
}
