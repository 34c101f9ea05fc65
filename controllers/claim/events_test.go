package claim

import (
	"testing"

	"github.com/stretchr/testify/assert"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

func TestEventMessages(t *testing.T) {
	assert.Equal(t, "Waiting for MetalLB to assign an IPv4 address from pool iad-public (class public)",
		msgWaitingForMetalLB(iadv1alpha1.FamilyIPv4, "public"))

	other := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "team-b", Name: "db", UID: "u-1"})
	assert.Equal(t, "MetalLB assigned IPv4 address 192.0.2.1 to this claim, but IPAddress ip-192-0-2-1 already exists and "+
		"is bound to claim team-b/db (uid u-1); MetalLB and the ledger disagree, so the driver leaves both alone for an administrator to resolve",
		msgLedgerMismatch(iadv1alpha1.FamilyIPv4, "192.0.2.1", &other))
	free := testAddress("ip-192-0-2-1", "192.0.2.1", nil)
	free.Status.Phase = iadv1alpha1.AddressAvailable
	assert.Contains(t, msgLedgerMismatch(iadv1alpha1.FamilyIPv4, "192.0.2.1", &free), "already exists and is bound to no claim (Available)")
	noUID := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "team-b", Name: "db"})
	assert.Contains(t, msgLedgerMismatch(iadv1alpha1.FamilyIPv4, "192.0.2.1", &noUID), "is bound to claim team-b/db;")
}

func TestAllocationFailure(t *testing.T) {
	tests := []struct {
		name, metallb, reason, message string
	}{
		{
			name:    "exhausted",
			metallb: `Failed to allocate IP for "iad-system/alloc-ipv4-x": no available IPs`,
			reason:  ReasonPoolExhausted,
			message: "MetalLB has no free IPv4 address in pool iad-public (class public): the pool is exhausted or has no IPv4 range. " +
				`The claim stays Pending and proceeds as soon as an address is freed. MetalLB said: Failed to allocate IP for "iad-system/alloc-ipv4-x": no available IPs`,
		},
		{
			name:    "unknown pool",
			metallb: `Failed to allocate IP for "iad-system/alloc-ipv4-x": unknown pool "iad-public"`,
			reason:  ReasonPoolNotReady,
			message: "MetalLB does not know pool iad-public (class public) yet, so it cannot assign an IPv4 address; " +
				`the claim proceeds once the pool is rendered. MetalLB said: Failed to allocate IP for "iad-system/alloc-ipv4-x": unknown pool "iad-public"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, message := allocationFailure(iadv1alpha1.FamilyIPv4, "public", tt.metallb)
			assert.Equal(t, tt.reason, reason)
			assert.Equal(t, tt.message, message)
		})
	}
}
