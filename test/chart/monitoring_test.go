package chart

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cozystack/metallb-iad/controllers/claim"
	"github.com/cozystack/metallb-iad/controllers/class"
	"github.com/cozystack/metallb-iad/controllers/ipaddress"
	"github.com/cozystack/metallb-iad/controllers/service"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/names"
)

// binaries are the controllers cmd/<name> runs. Importing their packages
// registers, as in each binary, the driver's collectors and
// controller-runtime's (reconcile, work queue, leader election, client,
// process and Go runtime) in controller-runtime's metrics.Registry, which
// the binaries' /metrics endpoint serves. Every registration happens at
// package initialisation; building a manager adds none.
var binaries = []bootstrap.Controller{class.Controller, claim.Controller, service.Controller, ipaddress.Controller}

func TestPodMonitor(t *testing.T) {
	r := render(t, "")
	assert.Empty(t, r.Find("PodMonitor"), "off by default")

	r = render(t, `
metrics: {podMonitor: {enabled: true, interval: 30s, scrapeTimeout: 10s, labels: {release: prom}}}
controllers: {ipaddress: {metricsBindAddress: "0"}}
`)
	assert.ElementsMatch(t, []string{"metallb-iad-class-metrics", "metallb-iad-claim-metrics", "metallb-iad-service-metrics"}, names4(r, "PodMonitor"))
	assert.Empty(t, r.Find("Service"), "a PodMonitor needs no Service")
	assert.Empty(t, r.Find("ServiceMonitor"))
	for _, c := range []string{"class", "claim", "service"} {
		pm := must(t, r, "PodMonitor", "metallb-iad-"+c+"-metrics")
		assert.Equal(t, releaseNS, pm.GetNamespace())
		assert.Equal(t, "prom", pm.GetLabels()["release"])
		assert.Equal(t, c, pm.GetLabels()["app.kubernetes.io/component"])
		spec := pm.Object["spec"].(map[string]any)
		assert.Equal(t, map[string]any{"matchLabels": selectorOf(c)}, spec["selector"])
		assert.Equal(t, map[string]any{"matchNames": []any{releaseNS}}, spec["namespaceSelector"])
		assert.Equal(t, []any{map[string]any{"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}}, spec["podMetricsEndpoints"])
		// The port the endpoint names is the container's.
		assert.Contains(t, fmt.Sprint(container(t, deployment(t, r, c))["ports"]), "name:metrics")
	}

	// Both would scrape every pod twice.
	_, err := Render(Release{}, `metrics: {podMonitor: {enabled: true}, serviceMonitor: {enabled: true}}`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "enable one of them")
}

// alertsOf returns the rules of the release's PrometheusRule, or nil if
// there is none.
func alertsOf(t *testing.T, r *Rendered) []map[string]any {
	t.Helper()
	prs := r.Find("PrometheusRule")
	if len(prs) == 0 {
		return nil
	}
	require.Len(t, prs, 1)
	groups, _, _ := unstructured.NestedSlice(prs[0].Object, "spec", "groups")
	require.Len(t, groups, 1)
	var out []map[string]any
	for _, rule := range groups[0].(map[string]any)["rules"].([]any) {
		out = append(out, rule.(map[string]any))
	}
	return out
}

// podsOf returns the controller whose pods an expression selects.
var podsOf = regexp.MustCompile(`pod=~"metallb-iad-([a-z]+)-`)

// alertsByController lists, per controller, the names of its alerts.
func alertsByController(t *testing.T, rules []map[string]any) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, rule := range rules {
		m := podsOf.FindStringSubmatch(rule["expr"].(string))
		require.NotNil(t, m, "%s selects no controller's pods: %s", rule["alert"], rule["expr"])
		out[m[1]] = append(out[m[1]], rule["alert"].(string))
	}
	return out
}

func TestPrometheusRule(t *testing.T) {
	assert.Empty(t, render(t, "").Find("PrometheusRule"), "off by default")

	r := render(t, `metrics: {prometheusRule: {enabled: true, labels: {release: prom}}}`)
	pr := must(t, r, "PrometheusRule", "metallb-iad")
	assert.Equal(t, releaseNS, pr.GetNamespace())
	assert.Equal(t, "prom", pr.GetLabels()["release"])
	rules := alertsOf(t, r)
	assert.Equal(t, map[string][]string{
		"class":     {"MetalLBIADControllerNoLeader", "MetalLBIADReconcileErrors", "MetalLBIADClassRefused"},
		"claim":     {"MetalLBIADControllerNoLeader", "MetalLBIADReconcileErrors", "MetalLBIADClaimsPending", "MetalLBIADPoolExhausted"},
		"service":   {"MetalLBIADControllerNoLeader", "MetalLBIADReconcileErrors", "MetalLBIADUnauthorizedHolder"},
		"ipaddress": {"MetalLBIADControllerNoLeader", "MetalLBIADReconcileErrors", "MetalLBIADAddressConflict", "MetalLBIADAddressLost"},
	}, alertsByController(t, rules))

	for _, rule := range rules {
		name := rule["alert"].(string)
		expr := rule["expr"].(string)
		labels, _ := rule["labels"].(map[string]any)
		assert.Contains(t, []any{"critical", "warning"}, labels["severity"], name)
		ann, _ := rule["annotations"].(map[string]any)
		assert.NotEmpty(t, ann["summary"], name)
		assert.NotEmpty(t, ann["description"], name)
		// Each series it reads is the release's, by namespace and pod.
		for _, sel := range regexp.MustCompile(`\{[^}]*\}`).FindAllString(expr, -1) {
			assert.Contains(t, sel, `namespace="`+releaseNS+`"`, name)
			assert.Regexp(t, `pod=~"metallb-iad-(class|claim|service|ipaddress)-\[a-z0-9\]\+-\[a-z0-9\]\+"`, sel, name)
		}
		if name == "MetalLBIADControllerNoLeader" {
			c := podsOf.FindStringSubmatch(expr)[1]
			assert.Contains(t, expr, `name="`+names.LeaseID(c)+`"`, "the binary's lease")
			assert.Equal(t, names.LeaseID(c), labels["lease"])
			assert.Equal(t, releaseNS, labels["namespace"])
		}
	}

	// A controller without metrics gets no alerts; one without leader
	// election or replicas no leader alert; additional rules come last.
	r = render(t, `
metrics:
  prometheusRule:
    enabled: true
    additionalRules:
      - alert: ClassNearlyFull
        expr: sum(metallb_iad_addresses) > 1000
        for: 30m
        labels: {severity: warning}
        annotations: {summary: nearly full}
      - record: iad:claims_pending:sum
        expr: sum(metallb_iad_claim_pending)
controllers:
  class: {metricsBindAddress: "0"}
  service: {leaderElect: false}
  ipaddress: {replicas: 0}
`)
	rules = alertsOf(t, r)
	require.GreaterOrEqual(t, len(rules), 2)
	extra := rules[len(rules)-2:]
	assert.Equal(t, map[string]any{
		"alert": "ClassNearlyFull", "expr": "sum(metallb_iad_addresses) > 1000", "for": "30m",
		"labels": map[string]any{"severity": "warning"}, "annotations": map[string]any{"summary": "nearly full"},
	}, extra[0])
	assert.Equal(t, map[string]any{"record": "iad:claims_pending:sum", "expr": "sum(metallb_iad_claim_pending)"}, extra[1])
	assert.Equal(t, map[string][]string{
		"claim":     {"MetalLBIADControllerNoLeader", "MetalLBIADReconcileErrors", "MetalLBIADClaimsPending", "MetalLBIADPoolExhausted"},
		"service":   {"MetalLBIADReconcileErrors", "MetalLBIADUnauthorizedHolder"},
		"ipaddress": {"MetalLBIADReconcileErrors", "MetalLBIADAddressConflict", "MetalLBIADAddressLost"},
	}, alertsByController(t, rules[:len(rules)-2]))

	// Nothing to alert on: no PrometheusRule at all.
	r = render(t, `
metrics: {prometheusRule: {enabled: true}}
controllers: {class: {metricsBindAddress: "0"}, claim: {metricsBindAddress: "0"}, service: {metricsBindAddress: "0"}, ipaddress: {metricsBindAddress: "0"}}
`)
	assert.Empty(t, r.Find("PrometheusRule"))
}

// TestPrometheusRuleMetricsAreServed checks that every metric an alert of
// the chart reads is one the controller binaries register, so no alert
// waits on a series that can never exist.
func TestPrometheusRuleMetricsAreServed(t *testing.T) {
	var binaryNames []string
	for _, b := range binaries {
		binaryNames = append(binaryNames, b.Name)
	}
	require.Equal(t, controllers, binaryNames, "the chart's controllers are the binaries'")

	// The check itself tells a served name from an unknown one.
	require.True(t, registered(t, metrics.Registry, "metallb_iad_claim_pending"))
	require.True(t, registered(t, metrics.Registry, "controller_runtime_reconcile_errors_total"))
	require.True(t, registered(t, metrics.Registry, "leader_election_master_status"))
	require.False(t, registered(t, metrics.Registry, "metallb_iad_no_such_metric"))

	rules := alertsOf(t, render(t, `metrics: {prometheusRule: {enabled: true}}`))
	require.NotEmpty(t, rules)
	seen := map[string]bool{}
	for _, rule := range rules {
		expr := rule["expr"].(string)
		used, err := metricNames(expr)
		require.NoError(t, err, rule["alert"])
		require.NotEmpty(t, used, "%s reads no metric: %s", rule["alert"], expr)
		for _, name := range used {
			seen[name] = true
			assert.True(t, served(t, name), "%s reads %s, which no controller serves", rule["alert"], name)
		}
	}
	t.Logf("metrics the alerts read: %v", slices.Sorted(maps.Keys(seen)))
}

// served reports whether the binaries' registry serves a metric of that
// name, a histogram's or summary's _bucket, _sum and _count series included.
func served(t *testing.T, name string) bool {
	if registered(t, metrics.Registry, name) {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return registered(t, metrics.Registry, base)
		}
	}
	return false
}

// registered reports whether reg holds a collector that describes a metric
// of that name. It offers reg a probe of that name with a help text of its
// own: a registry refuses a descriptor whose name it already holds with
// other labels or help (the consistency rule of prometheus.Desc) and
// accepts any other, which the probe then withdraws.
func registered(t *testing.T, reg prometheus.Registerer, name string) bool {
	t.Helper()
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "metallb-iad chart test probe"})
	// A probe that an empty registry refuses would prove nothing.
	require.NoError(t, prometheus.NewRegistry().Register(probe), name)
	if err := reg.Register(probe); err != nil {
		return true
	}
	require.True(t, reg.Unregister(probe))
	return false
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promWord     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset"}
)

// metricNames returns the metric names a PromQL expression selects. It
// needs every selector written with label matchers (name{...}), as the
// chart's are; a bare word it cannot place is an error, not a guess.
func metricNames(expr string) ([]string, error) {
	e := promString.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, "{}")
	e = promRange.ReplaceAllString(e, "[]")
	e = promGrouping.ReplaceAllString(e, "")
	var out []string
	for _, loc := range promWord.FindAllStringIndex(e, -1) {
		word, next := e[loc[0]:loc[1]], strings.TrimLeft(e[loc[1]:], " ")
		switch {
		case strings.HasPrefix(next, "{"):
			if !slices.Contains(out, word) {
				out = append(out, word)
			}
		case strings.HasPrefix(next, "("), slices.Contains(promKeywords, word):
			// A function, an aggregation or an operator.
		default:
			return nil, fmt.Errorf("cannot tell whether %q is a metric in %q: write selectors with label matchers", word, expr)
		}
	}
	return out, nil
}

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr    string
		want    []string
		wantErr bool
	}{
		{`absent(up{job="a"} == 1)`, []string{"up"}, false},
		{`sum by (namespace, pod) (rate(x_total{a="b",c=~"d-[a-z]+"}[5m])) > 0`, []string{"x_total"}, false},
		{`a{} / on(pod) group_left(node) b{x="}"} unless c{}`, []string{"a", "b", "c"}, false},
		{`sum(bare_metric) > 0`, nil, true},
	}
	for _, tt := range tests {
		got, err := metricNames(tt.expr)
		if tt.wantErr {
			assert.Error(t, err, tt.expr)
			continue
		}
		assert.NoError(t, err, tt.expr)
		assert.Equal(t, tt.want, got, tt.expr)
	}
}
