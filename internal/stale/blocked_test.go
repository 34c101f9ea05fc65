package stale

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestAllocated drives the informer handler through the events a
// Service goes through: created without an address, assigned one, updated
// while holding it, losing it, and deleted (also as a tombstone).
func TestAllocated(t *testing.T) {
	var c Allocated
	h := c.Handler()
	bare := &corev1.Service{}
	held := &corev1.Service{Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{
		Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}}}}}

	h.OnAdd(bare, false)
	h.OnAdd(held, false)
	assert.Equal(t, int64(1), c.Count(), "only a Service holding an address counts")
	h.OnUpdate(bare, held)
	assert.Equal(t, int64(2), c.Count(), "assigned")
	h.OnUpdate(held, held)
	assert.Equal(t, int64(2), c.Count(), "still holding")
	h.OnUpdate(held, bare)
	assert.Equal(t, int64(1), c.Count(), "lost its address")
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "t/web", Obj: held})
	assert.Equal(t, int64(0), c.Count(), "deleted, seen as a tombstone")
	h.OnDelete(bare)
	assert.Equal(t, int64(0), c.Count())
}
