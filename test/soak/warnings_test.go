package soak

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJudgeWarnings(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	history := []stormEvent{
		{Kind: "pool-delete", Class: "soak-edit", Start: at(10), End: at(11)},
		{Kind: faultMetalLB, Fault: true, Start: at(100), End: at(105)},
		{Kind: "service", Fault: true, Start: at(200), End: at(202)},
	}
	w := func(reason, kind, name, class string, s int) warning {
		return warning{Reason: reason, Kind: kind, Name: name, Namespace: "soak-a", Class: class, At: at(s)}
	}
	ws := []warning{
		w("FamilyMismatch", "Service", "svc-1", "", 1),                          // design
		w("AddressLost", "IPAddress", "ip-10-77-2-1", "soak-edit", 12),          // the pool deleted
		w("AddressLost", "IPAddress", "ip-10-77-0-1", "soak-retain", 12),        // another class's: nothing explains it
		w("AttachmentRefused", "IPAddress", "ip-10-77-1-1", "soak-delete", 60),  // no fault, no operation
		w("AttachmentRefused", "IPAddress", "ip-10-77-1-2", "soak-delete", 120), // MetalLB restarted
		w("FamilyMismatch", "Service", "svc-1", "", 201),                        // said again after the controller's restart
		{Reason: "ClaimNotFound", Kind: "Service", Namespace: "soak-a", Name: "svc-2", At: at(210), Repeat: true},
	}
	ws[5].Repeat = true
	parts, bad := judgeWarnings(ws, history, t0, at(300))
	assert.Len(t, bad, 2)
	assert.Contains(t, bad[0], "AddressLost on IPAddress ip-10-77-0-1")
	assert.Contains(t, bad[1], "AttachmentRefused on IPAddress ip-10-77-1-1")
	require.Len(t, parts, 5, "fault-free, MetalLB's, fault-free, the service controller's, fault-free")
	assert.Empty(t, parts[1].Unexplained)
	assert.Equal(t, []string{faultMetalLB}, parts[1].Faults)
	assert.Equal(t, 2, parts[0].ByReason["AddressLost"])
	assert.Len(t, parts[0].Unexplained, 2)
	assert.Equal(t, map[string]int{"FamilyMismatch": 1, "ClaimNotFound": 1}, parts[3].ByReason)
}

func TestStretches(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	parts := stretches([]stormEvent{
		{Kind: "claim", Fault: true, Start: at(10), End: at(12)},
		{Kind: "metallb", Fault: true, Start: at(20), End: at(33)}, // within the first's window: one stretch
		{Kind: "apiserver", Fault: true, Start: at(200), End: at(205)},
		{Kind: "claim-create", Start: at(50), End: at(51)},
	}, t0, at(300))
	require.Len(t, parts, 5)
	assert.Equal(t, at(10), parts[1].Start)
	assert.Equal(t, at(33).Add(causeWindow), parts[1].End)
	assert.Equal(t, []string{"claim", "metallb"}, parts[1].Faults)
	assert.Empty(t, parts[2].Faults)
	assert.Equal(t, at(205).Add(restartWindow), parts[3].End, "a restart explains for restartWindow")
}
