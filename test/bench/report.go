package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cozystack/metallb-iad/test/cluster"
)

// ParseSeries splits a series as written in the exposition format
// (`name{a="x",b="y"}`) into its name and labels.
func ParseSeries(series string) (string, map[string]string) {
	name, rest, ok := strings.Cut(series, "{")
	labels := map[string]string{}
	if !ok {
		return series, labels
	}
	rest = strings.TrimSuffix(rest, "}")
	for rest != "" {
		k, v, ok := strings.Cut(rest, `="`)
		if !ok {
			break
		}
		// The value ends at the first unescaped quote.
		var sb strings.Builder
		i := 0
		for ; i < len(v); i++ {
			if v[i] == '\\' && i+1 < len(v) {
				i++
				sb.WriteByte(v[i])
				continue
			}
			if v[i] == '"' {
				break
			}
			sb.WriteByte(v[i])
		}
		labels[strings.TrimSpace(k)] = sb.String()
		rest = strings.TrimPrefix(v[min(i+1, len(v)):], ",")
	}
	return name, labels
}

// Request names one kind of API request: "VERB resource" or
// "VERB resource/subresource".
type Request string

// writeVerbs are the verbs of apiserver_request_total that change state.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true}

// APIRequests is the difference of apiserver_request_total between two
// scrapes of the API server, by verb and resource. WATCH is left out (a
// watch is counted when it starts, not per event).
func APIRequests(before, after Metrics) map[Request]float64 {
	out := map[Request]float64{}
	for series, v := range after {
		name, l := ParseSeries(series)
		if name != "apiserver_request_total" || l["verb"] == "WATCH" {
			continue
		}
		d := v - before[series]
		if d <= 0 {
			continue
		}
		r := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			r += "/" + l["subresource"]
		}
		out[Request(r)] += d
	}
	return out
}

// APIRequestsWithCode is like APIRequests but counts only answers with the
// given HTTP code.
func APIRequestsWithCode(before, after Metrics, code string) map[Request]float64 {
	out := map[Request]float64{}
	for series, v := range after {
		name, l := ParseSeries(series)
		if name != "apiserver_request_total" || l["code"] != code {
			continue
		}
		if d := v - before[series]; d > 0 {
			r := l["verb"] + " " + l["resource"]
			if l["subresource"] != "" {
				r += "/" + l["subresource"]
			}
			out[Request(r)] += d
		}
	}
	return out
}

// IsWrite reports whether a request changes state.
func (r Request) IsWrite() bool {
	verb, _, _ := strings.Cut(string(r), " ")
	return writeVerbs[verb]
}

// Resource is the resource (and subresource) a request names.
func (r Request) Resource() string {
	_, res, _ := strings.Cut(string(r), " ")
	return res
}

// Writes adds up the writes among requests, leaving out the resources named.
func Writes(reqs map[Request]float64, except ...string) float64 {
	var n float64
	for r, v := range reqs {
		if r.IsWrite() && !slices.Contains(except, r.Resource()) {
			n += v
		}
	}
	return n
}

// metallbWrites are the resources only MetalLB writes here: the status of
// Services and of pools.
var metallbWrites = []string{"services/status", "ipaddresspools/status"}

// ResyncWrites are the writes of a controller's restart that are not
// MetalLB's (Service and pool status), its leader election (leases) or
// Events: what the restarted controller's resync wrote. MetalLB's own
// writes in the window are mostly delayed retries of earlier full passes.
func ResyncWrites(reqs map[Request]float64) float64 {
	return Writes(reqs, append([]string{"leases", "events"}, metallbWrites...)...)
}

// MetalLBWrites are MetalLB's writes among reqs.
func MetalLBWrites(reqs map[Request]float64) float64 {
	var n float64
	for r, v := range reqs {
		if r.IsWrite() && slices.Contains(metallbWrites, r.Resource()) {
			n += v
		}
	}
	return n
}

// Total adds up requests, leaving out the resources named.
func Total(reqs map[Request]float64, except ...string) float64 {
	var n float64
	for r, v := range reqs {
		if !slices.Contains(except, r.Resource()) {
			n += v
		}
	}
	return n
}

// PerOp formats requests divided by ops, largest first, as
// "PATCH services 2.0, POST ipaddresses 1.0"; kinds below 0.05 per op and
// the resources named in except are left out.
func PerOp(reqs map[Request]float64, ops int, except ...string) string {
	type kv struct {
		r Request
		v float64
	}
	var xs []kv
	for r, v := range reqs {
		if slices.Contains(except, r.Resource()) || ops == 0 || v/float64(ops) < 0.05 {
			continue
		}
		xs = append(xs, kv{r, v / float64(ops)})
	}
	slices.SortFunc(xs, func(a, b kv) int {
		if a.v != b.v {
			if a.v > b.v {
				return -1
			}
			return 1
		}
		return strings.Compare(string(a.r), string(b.r))
	})
	parts := make([]string, 0, len(xs))
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%s %.1f", x.r, x.v))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// DriverWrites is the driver's own writes (POST, PUT, PATCH and DELETE
// from rest_client_requests_total, summed over its controllers) minus the
// lease renewals of its leader elections, which the API server counts
// apart: what the driver wrote because of the work.
func DriverWrites(before, after map[string]Metrics, leaseWrites float64) float64 {
	var n float64
	for c, m := range after {
		for series, v := range m {
			name, l := ParseSeries(series)
			if name != "rest_client_requests_total" {
				continue
			}
			switch l["method"] {
			case "POST", "PUT", "PATCH", "DELETE":
				n += v - before[c][series]
			}
		}
	}
	return max(n-leaseWrites, 0)
}

// WritesByController is each driver controller's POST, PATCH and DELETE
// requests between two scrapes of its metrics, by verb: where the driver's
// writes go. The driver writes nothing with PUT except its lease renewals,
// so leaving PUT out leaves out exactly those.
func WritesByController(before, after map[string]Metrics) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for c, m := range after {
		for series, v := range m {
			name, l := ParseSeries(series)
			if name != "rest_client_requests_total" {
				continue
			}
			switch verb := l["method"]; verb {
			case "POST", "PATCH", "DELETE":
				if out[c] == nil {
					out[c] = map[string]float64{}
				}
				out[c][verb] += v - before[c][series]
			}
		}
	}
	return out
}

// PassesByController is each driver controller's reconciles between two
// scrapes of its process's metrics (controller_runtime_reconcile_total, by
// its controller label: a process runs more than one), keyed
// "process/controller".
func PassesByController(before, after map[string]Metrics) map[string]float64 {
	out := map[string]float64{}
	for p, m := range after {
		for series, v := range m {
			name, l := ParseSeries(series)
			if name != "controller_runtime_reconcile_total" {
				continue
			}
			if d := v - before[p][series]; d > 0 {
				out[p+"/"+l["controller"]] += d
			}
		}
	}
	return out
}

// MetalLBLog counts what the MetalLB controller logged (at info level).
type MetalLBLog struct {
	// Reconciles is how many single-Service reconciles started (MetalLB's
	// other reconcilers, of pools and their status, are not counted).
	Reconciles int
	// FullPasses is how many passes over every Service started.
	FullPasses int
	// ForcedReloads is how many single-Service reconciles asked for a full
	// pass ("force service reload": an allocated Service was deleted, lost
	// its IP, or changed its allocation key).
	ForcedReloads int
	// FailedPasses is how many full passes ended in a retry under backoff
	// (a Service in the pass failed or asked for another pass).
	FailedPasses int
	// HandleFailures is how many times processing a Service failed
	// ("failed to handle service": an allocation MetalLB could not make,
	// such as a pin to an address no pool has), in a single reconcile or a
	// full pass.
	HandleFailures int
	// UpdateFailures is how many status updates failed ("failed to update
	// service"); Conflicts is how many of those were 409 conflicts.
	UpdateFailures, Conflicts int
}

// CountMetalLBLog reads MetalLB controller log lines (go-kit JSON).
func CountMetalLBLog(text string) MetalLBLog {
	var c MetalLBLog
	for _, line := range strings.Split(text, "\n") {
		pass := strings.Contains(line, cluster.MetalLBFullPassLog)
		single := strings.Contains(line, `"controller":"ServiceReconciler",`)
		switch {
		case strings.Contains(line, `"start reconcile"`) && pass:
			c.FullPasses++
		case strings.Contains(line, `"start reconcile"`) && single:
			c.Reconciles++
		}
		if strings.Contains(line, "force service reload") {
			switch {
			case pass:
				c.FailedPasses++
			case single:
				c.ForcedReloads++
			}
		}
		if strings.Contains(line, "failed to handle service") {
			c.HandleFailures++
		}
		if strings.Contains(line, "failed to update service") {
			c.UpdateFailures++
			if strings.Contains(line, "the object has been modified") || strings.Contains(line, "Operation cannot be fulfilled") {
				c.Conflicts++
			}
		}
	}
	return c
}

// PassClock adds up the time MetalLB spends in full passes over every
// Service, from its log read piece by piece: a pass may start in one piece
// and end in a later one. MetalLB logs time to the second, so each pass is
// counted to within a second.
type PassClock struct {
	// Passes is how many full passes ended; Time is how long they took.
	Passes int
	Time   time.Duration
	// started is when the pass in progress started (zero when none is).
	started time.Time
}

// Read takes the next piece of the log.
func (p *PassClock) Read(text string) {
	for _, line := range strings.Split(text, "\n") {
		if !strings.Contains(line, cluster.MetalLBFullPassLog) {
			continue
		}
		ts, ok := logTime(line)
		switch {
		case !ok:
		case strings.Contains(line, `"start reconcile"`):
			p.started = ts
		case strings.Contains(line, `"end reconcile"`) && !p.started.IsZero():
			p.Passes++
			p.Time += ts.Sub(p.started)
			p.started = time.Time{}
		}
	}
}

// logTime is the time of a go-kit JSON log line ("ts").
func logTime(line string) (time.Time, bool) {
	const key = `"ts":"`
	i := strings.Index(line, key)
	if i < 0 {
		return time.Time{}, false
	}
	rest := line[i+len(key):]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, rest[:j])
	return t, err == nil
}
