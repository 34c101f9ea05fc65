package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestHandoffMessages(t *testing.T) {
	assert.Equal(t, `Attached claim "ip": MetalLB is asked for 203.0.113.7 (shared handoff: the Service shares the address with its placeholder, which keeps holding it while attached, so it is never unheld, not even when the Service is detached or deleted)`,
		msgAssociated("ip", "203.0.113.7", ModeShared, ""))
	assert.Equal(t, `Attached claim "ip": MetalLB is asked for 203.0.113.7 (gap handoff: the address was unheld for a moment, because the Service uses port 9/TCP, which the placeholder holding the address uses too)`,
		msgAssociated("ip", "203.0.113.7", ModeGap, ShareProblem(workload([]corev1.ServicePort{port(corev1.ProtocolTCP, 9)}), "k")))
	assert.Contains(t, msgReleasing([]string{"203.0.113.7"}, "::", ModeShared, "gold"), "Detaching 203.0.113.7 (shared handoff): a placeholder holds the address")
	assert.Contains(t, msgReleasing([]string{"203.0.113.7"}, "::", ModeGap, "gold"), `Detaching 203.0.113.7: the pin is set to "::"`)
	assert.Contains(t, msgHandingBack([]string{"203.0.113.7", "2001:db8::7"}), "Detaching 203.0.113.7,2001:db8::7 (shared handoff): the Service keeps the address")
}
