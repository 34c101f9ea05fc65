package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// auditLine renders one audit log line of a Service as the API server
// writes it. A ServiceAccount acts by impersonation, as on the local
// control plane.
func auditLine(verb, user, agent, name, sub string, code int) string {
	return auditLineOf("services", verb, user, agent, name, sub, code)
}

// auditLineOf renders one audit log line of any resource.
func auditLineOf(resource, verb, user, agent, name, sub string, code int) string {
	who := fmt.Sprintf(`"user":{"username":%q}`, user)
	if strings.HasPrefix(user, "system:serviceaccount:") {
		who = fmt.Sprintf(`"user":{"username":"iad-admin"},"impersonatedUser":{"username":%q}`, user)
	}
	return fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","verb":%q,`+
		`%s,"userAgent":%q,"objectRef":{"resource":%q,"namespace":"ns","name":%q,"subresource":%q},`+
		`"responseStatus":{"code":%d}}`, verb, who, agent, resource, name, sub, code)
}

const (
	driverUser = "system:serviceaccount:metallb-iad-system:metallb-iad-service"
	admin      = "iad-admin"
	metallbUA  = "metallb-controller/v0.0.0 (linux/amd64) kubernetes/$Format"
	benchUA    = "bench.test/v0.0.0 (linux/amd64) kubernetes/$Format"
)

func TestConflictAttribution(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lines  []string
		want   map[string]float64
		events float64
	}{
		{
			name: "a pass that read its own write stale",
			lines: []string{
				auditLine("patch", driverUser, "service/x", "w", "", 200),
				auditLine("update", admin, metallbUA, "w", "status", 200),
				auditLine("update", admin, metallbUA, "w", "status", 409),
			},
			want: map[string]float64{WriterMetalLB: 1},
		},
		{
			name: "a driver write inside a pass",
			lines: []string{
				auditLine("update", admin, metallbUA, "w", "status", 200),
				auditLine("patch", driverUser, "service/x", "w", "", 200),
				auditLine("update", admin, metallbUA, "w", "status", 409),
			},
			want: map[string]float64{WriterDriver: 1},
		},
		{
			name: "reads (BENCH_AUDIT=all) are not writes",
			lines: []string{
				auditLine("patch", admin, benchUA, "w", "", 200),
				auditLine("get", driverUser, "service/x", "w", "", 200),
				auditLine("list", driverUser, "service/x", "", "", 200),
				auditLine("update", admin, metallbUA, "w", "status", 409),
			},
			want: map[string]float64{WriterOther: 1},
		},
		{
			name: "the user's write, and a Service never written before",
			lines: []string{
				auditLine("patch", admin, benchUA, "w", "", 200),
				auditLine("update", admin, metallbUA, "w", "status", 409),
				auditLine("update", admin, metallbUA, "v", "status", 409),
			},
			want: map[string]float64{WriterOther: 2},
		},
		{
			name: "refused writes and other clients' 409s change nothing",
			lines: []string{
				auditLine("update", admin, metallbUA, "w", "status", 200),
				auditLine("patch", driverUser, "service/x", "w", "", 409),
				auditLine("patch", driverUser, "service/x", "w", "", 409),
				auditLine("update", admin, metallbUA, "w", "status", 409),
			},
			want: map[string]float64{WriterMetalLB: 1},
		},
		{
			name: "a deletion is a write (it sets deletionTimestamp where a finalizer waits)",
			lines: []string{
				auditLine("update", admin, metallbUA, "w", "status", 200),
				auditLine("delete", driverUser, "ipaddress/x", "w", "", 200),
				auditLine("update", admin, metallbUA, "w", "status", 409),
			},
			want: map[string]float64{WriterDriver: 1},
		},
		{
			name: "the driver's Event writes are counted, an Event is no Service write, others' Events and refused ones are not counted",
			lines: []string{
				auditLine("update", admin, metallbUA, "w", "status", 200),
				auditLineOf("events", "create", driverUser, "service/x", "w.1", "", 201),
				auditLineOf("events", "patch", driverUser, "service/x", "w.1", "", 200),
				auditLineOf("events", "create", driverUser, "service/x", "w.2", "", 403),
				auditLineOf("events", "create", admin, metallbUA, "w.3", "", 201),
				auditLine("update", admin, metallbUA, "w", "status", 409),
			},
			want:   map[string]float64{WriterMetalLB: 1},
			events: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewConflictTracker("")
			tr.attribute([]byte(strings.Join(tc.lines, "\n") + "\n"))
			assert.Equal(t, tc.want, tr.total)
			assert.InDelta(t, tc.events, tr.events, 1e-9)
		})
	}
}

func TestConflictTrackerReadsWholeLinesAsTheLogGrows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	tr := NewConflictTracker(path)
	assert.Empty(t, tr.Totals().Conflicts, "no log yet")

	write := auditLine("patch", driverUser, "service/x", "w", "", 200) + "\n"
	conflict := auditLine("update", admin, metallbUA, "w", "status", 409)
	require.NoError(t, os.WriteFile(path, []byte(write+conflict[:40]), 0o600))
	assert.Empty(t, tr.Totals().Conflicts, "the line being written waits")

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(conflict[40:] + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	first := tr.Totals().Conflicts
	assert.Equal(t, map[string]float64{WriterDriver: 1}, first)

	first[WriterDriver] = 99
	assert.Equal(t, map[string]float64{WriterDriver: 1}, tr.Totals().Conflicts, "a counter: a reading is a copy, and nothing new was read")
}
