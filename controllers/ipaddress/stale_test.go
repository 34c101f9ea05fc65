package ipaddress

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestAllocatedServices drives the informer handler through the events a
// Service goes through: created without an address, assigned one, updated
// while holding it, losing it, and deleted (also as a tombstone).
func TestAllocatedServices(t *testing.T) {
	var c allocatedServices
	h := c.handler()
	bare := &corev1.Service{}
	held := &corev1.Service{Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{
		Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}}}}}

	h.OnAdd(bare, false)
	h.OnAdd(held, false)
	assert.Equal(t, int64(1), c.count(), "only a Service holding an address counts")
	h.OnUpdate(bare, held)
	assert.Equal(t, int64(2), c.count(), "assigned")
	h.OnUpdate(held, held)
	assert.Equal(t, int64(2), c.count(), "still holding")
	h.OnUpdate(held, bare)
	assert.Equal(t, int64(1), c.count(), "lost its address")
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "t/web", Obj: held})
	assert.Equal(t, int64(0), c.count(), "deleted, seen as a tombstone")
	h.OnDelete(bare)
	assert.Equal(t, int64(0), c.count())
}
