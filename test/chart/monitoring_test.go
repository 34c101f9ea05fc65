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
		assert.Equal(t, []any{endpoint(map[string]any{"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}, secureScrape)}, spec["podMetricsEndpoints"])
		// The port the endpoint names is the container's.
		assert.Contains(t, fmt.Sprint(container(t, deployment(t, r, c))["ports"]), "name:metrics")
	}
	checkScraper(t, r)

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

// secureScrape are the fields a monitor's endpoint scrapes secure metrics
// with by default: HTTPS without a certificate check (the controllers'
// certificates are self-signed), and the token of the chart's scraper.
var secureScrape = map[string]any{
	"scheme":    "https",
	"tlsConfig": map[string]any{"insecureSkipVerify": true},
	"authorization": map[string]any{
		"type":        "Bearer",
		"credentials": map[string]any{"name": "metallb-iad-metrics-scraper-token", "key": "token"},
	},
}

// endpoint returns a monitor endpoint's fields with those of scrape added.
func endpoint(fields, scrape map[string]any) map[string]any {
	out := maps.Clone(fields)
	maps.Copy(out, scrape)
	return out
}

// checkMetricsReader checks that the release's metrics-reader ClusterRole
// grants get on /metrics and nothing else.
func checkMetricsReader(t *testing.T, r *Rendered) {
	t.Helper()
	role := must(t, r, "ClusterRole", "metallb-iad-metrics-reader")
	assert.Empty(t, role.GetNamespace())
	assert.Equal(t, []any{map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}, role.Object["rules"])
}

// checkScraper checks the chart's own metrics scraper: a ServiceAccount, a
// token Secret of it that the API server fills, and a binding of it to the
// metrics-reader role.
func checkScraper(t *testing.T, r *Rendered) {
	t.Helper()
	const name = "metallb-iad-metrics-scraper"
	checkMetricsReader(t, r)

	sa := must(t, r, "ServiceAccount", name)
	assert.Equal(t, releaseNS, sa.GetNamespace())
	assert.Equal(t, false, sa.Object["automountServiceAccountToken"], "no pod runs as the scraper")

	secret := must(t, r, "Secret", name+"-token")
	assert.Equal(t, releaseNS, secret.GetNamespace(), "beside the monitors that name it")
	assert.Equal(t, "kubernetes.io/service-account-token", secret.Object["type"])
	assert.Equal(t, map[string]string{"kubernetes.io/service-account.name": name}, secret.GetAnnotations())
	assert.NotContains(t, secret.Object, "data", "the API server writes the token")

	crb := must(t, r, "ClusterRoleBinding", name)
	assert.Equal(t, map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metallb-iad-metrics-reader"}, crb.Object["roleRef"])
	assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": releaseNS}}, crb.Object["subjects"])
}

// assertNoScraper checks that the chart renders no metrics scraper.
func assertNoScraper(t *testing.T, r *Rendered) {
	t.Helper()
	assert.Nil(t, r.Get("ServiceAccount", "metallb-iad-metrics-scraper"))
	assert.Empty(t, r.Find("Secret"))
	assert.Nil(t, r.Get("ClusterRoleBinding", "metallb-iad-metrics-scraper"))
}

// monitorEndpoints returns the endpoints of every ServiceMonitor and
// PodMonitor of a render, by monitor name.
func monitorEndpoints(r *Rendered) map[string][]any {
	out := map[string][]any{}
	for _, kind := range []string{"ServiceMonitor", "PodMonitor"} {
		for _, m := range r.Find(kind) {
			eps, _, _ := unstructured.NestedSlice(m.Object, "spec", "endpoints")
			if kind == "PodMonitor" {
				eps, _, _ = unstructured.NestedSlice(m.Object, "spec", "podMetricsEndpoints")
			}
			out[kind+" "+m.GetName()] = eps
		}
	}
	return out
}

// TestSecureMetrics: metrics.secure reaches every controller as
// --metrics-secure; secure, the chart grants reading /metrics through the
// metrics-reader ClusterRole, binds metrics.readers to it, and its monitors
// scrape over HTTPS with the token of a scraper of its own; plain, none of
// that is rendered and the monitors scrape over HTTP.
func TestSecureMetrics(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		r := render(t, "")
		for _, c := range controllers {
			assert.Equal(t, []string{"true"}, flagValues(t, deployment(t, r, c), "metrics-secure"), c)
		}
		checkMetricsReader(t, r)
		assert.Nil(t, r.Get("ClusterRoleBinding", "metallb-iad-metrics-reader"), "no reader by default")
		assertNoScraper(t, r)
	})

	for _, monitor := range []string{"serviceMonitor", "podMonitor"} {
		t.Run(monitor, func(t *testing.T) {
			r := render(t, "metrics: {"+monitor+": {enabled: true}}")
			checkScraper(t, r)
			eps := monitorEndpoints(r)
			require.Len(t, eps, len(controllers))
			for name, ep := range eps {
				require.Len(t, ep, 1, name)
				assert.Equal(t, endpoint(map[string]any{"port": "metrics", "path": "/metrics"}, secureScrape), ep[0], name)
			}

			r = render(t, "metrics: {secure: false, "+monitor+": {enabled: true}}")
			for _, c := range controllers {
				assert.Equal(t, []string{"false"}, flagValues(t, deployment(t, r, c), "metrics-secure"), c)
			}
			assert.Nil(t, r.Get("ClusterRole", "metallb-iad-metrics-reader"))
			assertNoScraper(t, r)
			eps = monitorEndpoints(r)
			require.Len(t, eps, len(controllers))
			for name, ep := range eps {
				assert.Equal(t, []any{map[string]any{"port": "metrics", "path": "/metrics", "scheme": "http"}}, ep, name)
			}
		})
	}

	t.Run("readers", func(t *testing.T) {
		const readers = `
  readers:
    - {kind: ServiceAccount, name: prometheus-k8s, namespace: monitoring}
    - {kind: Group, name: sre, apiGroup: rbac.authorization.k8s.io}
`
		r := render(t, "metrics:"+readers)
		crb := must(t, r, "ClusterRoleBinding", "metallb-iad-metrics-reader")
		assert.Equal(t, map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metallb-iad-metrics-reader"}, crb.Object["roleRef"])
		assert.Equal(t, []any{
			map[string]any{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"},
			map[string]any{"kind": "Group", "name": "sre", "apiGroup": "rbac.authorization.k8s.io"},
		}, crb.Object["subjects"])
		checkMetricsReader(t, r)
		assertNoScraper(t, r)

		// Plain metrics need no reader.
		r = render(t, "metrics:\n  secure: false"+readers)
		assert.Nil(t, r.Get("ClusterRole", "metallb-iad-metrics-reader"))
		assert.Nil(t, r.Get("ClusterRoleBinding", "metallb-iad-metrics-reader"))
	})

	t.Run("own tlsConfig", func(t *testing.T) {
		r := render(t, `
metrics:
  podMonitor: {enabled: true}
  tlsConfig:
    serverName: metrics.example
    ca: {secret: {name: metrics-ca, key: ca.crt}}
`)
		for name, ep := range monitorEndpoints(r) {
			assert.Equal(t, map[string]any{
				"serverName": "metrics.example",
				"ca":         map[string]any{"secret": map[string]any{"name": "metrics-ca", "key": "ca.crt"}},
			}, ep[0].(map[string]any)["tlsConfig"], "%s: used as given, so the certificate is checked", name)
		}
	})

	t.Run("no controller serves metrics", func(t *testing.T) {
		r := render(t, `
metrics: {serviceMonitor: {enabled: true}, readers: [{kind: User, name: alice}]}
controllers: {class: {metricsBindAddress: "0"}, claim: {metricsBindAddress: "0"}, service: {metricsBindAddress: "0"}, ipaddress: {metricsBindAddress: "0"}}
`)
		assert.Empty(t, r.Find("ServiceMonitor"))
		assert.Nil(t, r.Get("ClusterRole", "metallb-iad-metrics-reader"))
		assert.Nil(t, r.Get("ClusterRoleBinding", "metallb-iad-metrics-reader"))
		assertNoScraper(t, r)
	})

	t.Run("names follow the release", func(t *testing.T) {
		r, err := Render(Release{Name: "edge", Namespace: "mon"}, "fullnameOverride: iad\nmetrics: {podMonitor: {enabled: true}, readers: [{kind: User, name: alice}]}")
		require.NoError(t, err)
		must(t, r, "ClusterRole", "iad-metrics-reader")
		assert.Equal(t, "iad-metrics-reader", must(t, r, "ClusterRoleBinding", "iad-metrics-reader").Object["roleRef"].(map[string]any)["name"])
		must(t, r, "ServiceAccount", "iad-metrics-scraper")
		secret := must(t, r, "Secret", "iad-metrics-scraper-token")
		assert.Equal(t, "iad-metrics-scraper", secret.GetAnnotations()["kubernetes.io/service-account.name"])
		crb := must(t, r, "ClusterRoleBinding", "iad-metrics-scraper")
		assert.Equal(t, "iad-metrics-reader", crb.Object["roleRef"].(map[string]any)["name"])
		assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": "iad-metrics-scraper", "namespace": "mon"}}, crb.Object["subjects"])
		for name, ep := range monitorEndpoints(r) {
			cred, _, _ := unstructured.NestedStringMap(ep[0].(map[string]any), "authorization", "credentials")
			assert.Equal(t, map[string]string{"name": "iad-metrics-scraper-token", "key": "token"}, cred, name)
		}
	})
}

func TestSecureMetricsSchema(t *testing.T) {
	checkSchema(t, []schemaCase{
		{"every metrics security value", `
metrics:
  secure: true
  readers:
    - {kind: ServiceAccount, name: prometheus-k8s, namespace: monitoring}
    - {kind: User, name: alice}
    - {kind: Group, name: sre, apiGroup: rbac.authorization.k8s.io}
  tlsConfig:
    ca: {configMap: {name: ca, key: ca.crt}}
    cert: {secret: {name: client, key: tls.crt}}
    keySecret: {name: client, key: tls.key}
    serverName: metrics.example
    insecureSkipVerify: false
    minVersion: TLS12
    maxVersion: TLS13
`, ""},
		{"plain metrics", `metrics: {secure: false}`, ""},
		{"secure not a boolean", `metrics: {secure: "true"}`, "secure"},
		{"readers not a list", `metrics: {readers: {kind: User, name: alice}}`, "readers"},
		{"reader a bare name", `metrics: {readers: [prometheus]}`, "readers"},
		{"reader of an unknown kind", `metrics: {readers: [{kind: Role, name: a}]}`, "kind"},
		{"reader without a name", `metrics: {readers: [{kind: User}]}`, "missing property 'name'"},
		{"ServiceAccount reader without a namespace", `metrics: {readers: [{kind: ServiceAccount, name: prometheus}]}`, "missing property 'namespace'"},
		{"misspelt reader key", `metrics: {readers: [{kind: User, name: a, namespaces: b}]}`, "namespaces"},
		{"tlsConfig not a map", `metrics: {tlsConfig: insecure}`, "tlsConfig"},
		{"misspelt tlsConfig key", `metrics: {tlsConfig: {insecureSkipVerfy: true}}`, "insecureSkipVerfy"},
		{"insecureSkipVerify not a boolean", `metrics: {tlsConfig: {insecureSkipVerify: "yes"}}`, "insecureSkipVerify"},
		{"unknown TLS version", `metrics: {tlsConfig: {minVersion: TLS1.2}}`, "minVersion"},
	})
}
