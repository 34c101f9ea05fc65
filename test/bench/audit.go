package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
)

// Who wrote a Service last before MetalLB's status update of it was
// refused with 409: the writer whose change made the version MetalLB held
// stale.
const (
	// WriterDriver is one of the driver's four controllers (their
	// ServiceAccounts).
	WriterDriver = "driver"
	// WriterMetalLB is MetalLB itself: a full pass read the Service from a
	// cache that did not show MetalLB's own status write yet.
	WriterMetalLB = "MetalLB"
	// WriterOther is anyone else: the benchmark acting as the user (its
	// annotations, its plain re-pins) or a controller of the control plane.
	WriterOther = "user"
)

// driverUserPrefix names the driver's ServiceAccounts on the local control
// plane.
const driverUserPrefix = "system:serviceaccount:metallb-iad-system:"

// auditEvent is the part of one audit log line (audit.k8s.io/v1 Event,
// JSON) the attribution reads.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	// ImpersonatedUser is who the request acted as: the local control
	// plane runs each controller as its ServiceAccount by impersonation.
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// writer classifies who made a request.
func (e *auditEvent) writer() string {
	user := e.User.Username
	if e.ImpersonatedUser != nil {
		user = e.ImpersonatedUser.Username
	}
	switch {
	case strings.HasPrefix(user, driverUserPrefix):
		return WriterDriver
	case strings.HasPrefix(e.UserAgent, "metallb-controller"):
		return WriterMetalLB
	}
	return WriterOther
}

// ConflictTracker reads the API server's audit log of Service writes as it
// grows and attributes each 409 answer to MetalLB's status update of a
// Service to the last successful write of that Service before it. It also
// counts the driver's Event writes, which its own request counters do not
// tell apart from its other writes.
type ConflictTracker struct {
	path string
	off  int64
	// last is the writer of each Service's last successful write seen.
	last map[string]string
	// total counts the refused updates seen so far, by writer.
	total map[string]float64
	// events counts the driver's successful Event writes seen so far
	// (creates, and the patches that count a repeated Event).
	events float64
}

// AuditTotals are a ConflictTracker's counters at one reading.
type AuditTotals struct {
	// Conflicts is MetalLB's refused status updates, by writer.
	Conflicts map[string]float64
	// DriverEvents is the driver's Event writes.
	DriverEvents float64
}

// NewConflictTracker tracks the audit log at path from its start.
func NewConflictTracker(path string) *ConflictTracker {
	return &ConflictTracker{path: path, last: map[string]string{}, total: map[string]float64{}}
}

// Totals reads the complete lines added since the last call and returns
// the counters so far (subtract two readings for a window).
func (t *ConflictTracker) Totals() AuditTotals {
	if t == nil {
		return AuditTotals{}
	}
	if f, err := os.Open(t.path); err == nil {
		defer f.Close()
		if _, err := f.Seek(t.off, io.SeekStart); err == nil {
			if data, err := io.ReadAll(f); err == nil {
				end := bytes.LastIndexByte(data, '\n') + 1 // a line being written waits for the next call
				t.off += int64(end)
				t.attribute(data[:end])
			}
		}
	}
	out := make(map[string]float64, len(t.total))
	for k, v := range t.total {
		out[k] = v
	}
	return AuditTotals{Conflicts: out, DriverEvents: t.events}
}

// attribute processes whole audit log lines in order.
func (t *ConflictTracker) attribute(lines []byte) {
	out := t.total
	sc := bufio.NewScanner(bytes.NewReader(lines))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.ObjectRef == nil || e.ResponseStatus == nil {
			continue
		}
		if e.Stage != "ResponseComplete" || !writes[e.Verb] {
			continue // the reads AuditPolicyAll logs too
		}
		if e.ObjectRef.Resource == "events" {
			if e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300 && e.writer() == WriterDriver {
				t.events++
			}
			continue
		}
		if e.ObjectRef.Resource != "services" {
			continue
		}
		key := e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
		code := e.ResponseStatus.Code
		switch {
		case code == 409 && e.ObjectRef.Subresource == "status" && e.writer() == WriterMetalLB:
			by := t.last[key]
			if by == "" {
				by = WriterOther
			}
			out[by]++
		case code >= 200 && code < 300:
			// A deletion is a write too: of a Service with a finalizer it
			// sets deletionTimestamp (a Service that is gone answers 404).
			t.last[key] = e.writer()
		}
	}
}

// AuditPolicy is the API server's audit policy for the benchmark: every
// write to a Service or its status, and every Event written, at metadata
// level, nothing else.
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - group: ""
    resources: ["services", "services/status"]
- level: Metadata
  verbs: ["create", "update", "patch"]
  resources:
  - group: ""
    resources: ["events"]
  - group: "events.k8s.io"
    resources: ["events"]
- level: None
`

// AuditPolicyAll logs every request but the leases' at metadata level,
// for reading one operation request by request (BENCH_AUDIT=all): the
// figures are taken the same way, and the log grows large.
const AuditPolicyAll = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  resources:
  - group: "coordination.k8s.io"
- level: Metadata
`

// writes are the verbs AuditPolicy logs for Services.
var writes = map[string]bool{"create": true, "update": true, "patch": true, "delete": true}

// auditPolicy is AuditPolicy, or AuditPolicyAll with BENCH_AUDIT=all.
func auditPolicy() string {
	if os.Getenv("BENCH_AUDIT") == "all" {
		return AuditPolicyAll
	}
	return AuditPolicy
}
