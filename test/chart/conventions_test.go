package chart

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// deployment returns a controller's Deployment in a default-named render.
func deployment(t *testing.T, r *Rendered, c string) *unstructured.Unstructured {
	t.Helper()
	return must(t, r, "Deployment", "metallb-iad-"+c)
}

// flagValues returns the values of every --name=... argument, in order.
func flagValues(t *testing.T, d *unstructured.Unstructured, name string) []string {
	t.Helper()
	var out []string
	for _, a := range container(t, d)["args"].([]any) {
		if v, ok := strings.CutPrefix(a.(string), "--"+name+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

func selectorOf(c string) map[string]any {
	return map[string]any{
		"app.kubernetes.io/name":      "metallb-iad",
		"app.kubernetes.io/instance":  "metallb-iad",
		"app.kubernetes.io/component": c,
	}
}

// everySetting sets every field that has a shared default to a value other
// than the chart's, as the body of a defaults or controllers.<name> block.
const everySetting = `
  resources:
    requests: {cpu: 20m, memory: 32Mi}
  nodeSelector: {kubernetes.io/os: linux}
  tolerations:
    - {key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}
  podLabels: {team: network}
  podAnnotations: {example.com/owner: network}
  priorityClassName: system-cluster-critical
  securityContext: {runAsUser: 1000, fsGroup: 2000}
  containerSecurityContext: {runAsUser: 1000, privileged: false}
  logLevel: debug
  logFormat: console
  leaderElection: {leaseDuration: 30s, renewDeadline: 20s, retryPeriod: 4s}
`

// sharedDefaults is everySetting as the defaults block.
const sharedDefaults = "defaults:" + everySetting

func TestSharedDefaultsApplyToEveryController(t *testing.T) {
	r := render(t, sharedDefaults)
	for _, c := range controllers {
		t.Run(c, func(t *testing.T) {
			d := deployment(t, r, c)
			ps := podSpec(t, d)
			ct := container(t, d)

			// Helm merges the given defaults into the chart's, key by key.
			assert.Equal(t, map[string]any{
				"requests": map[string]any{"cpu": "20m", "memory": "32Mi"},
				"limits":   map[string]any{"memory": "256Mi"},
			}, ct["resources"])
			assert.Equal(t, map[string]any{"kubernetes.io/os": "linux"}, ps["nodeSelector"])
			assert.Equal(t, []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}}, ps["tolerations"])
			terms, _, _ := unstructured.NestedSlice(ps, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
			assert.Len(t, terms, 1)
			assert.Equal(t, []any{map[string]any{
				"maxSkew": int64(1), "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
				"labelSelector": map[string]any{"matchLabels": selectorOf(c)},
			}}, ps["topologySpreadConstraints"])
			labels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
			assert.Equal(t, "network", labels["team"])
			assert.Equal(t, c, labels["app.kubernetes.io/component"])
			ann, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "annotations")
			assert.Equal(t, map[string]string{"example.com/owner": "network"}, ann)
			assert.Equal(t, "system-cluster-critical", ps["priorityClassName"])
			assert.Equal(t, map[string]any{
				"runAsNonRoot": true, "runAsUser": int64(1000), "runAsGroup": int64(65532), "fsGroup": int64(2000),
				"seccompProfile": map[string]any{"type": "RuntimeDefault"},
			}, ps["securityContext"])
			assert.Equal(t, map[string]any{
				"runAsNonRoot": true, "runAsUser": int64(1000), "runAsGroup": int64(65532),
				"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false, "privileged": false,
				"capabilities": map[string]any{"drop": []any{"ALL"}}, "seccompProfile": map[string]any{"type": "RuntimeDefault"},
			}, ct["securityContext"])
			assert.Equal(t, []string{"debug"}, flagValues(t, d, "zap-log-level"))
			assert.Equal(t, []string{"console"}, flagValues(t, d, "zap-encoder"))
			assert.Equal(t, []string{"30s"}, flagValues(t, d, "leader-elect-lease-duration"))
			assert.Equal(t, []string{"20s"}, flagValues(t, d, "leader-elect-renew-deadline"))
			assert.Equal(t, []string{"4s"}, flagValues(t, d, "leader-elect-retry-period"))
		})
	}
}

// TestPerControllerOverrideWins sets each field both in defaults and for the
// claim controller: the claim controller gets its own value (a map or list
// whole, not merged with the default), the others the default.
func TestPerControllerOverrideWins(t *testing.T) {
	tests := []struct {
		field, defaults, claim string
		// get reads the field from a Deployment.
		get                  func(t *testing.T, d *unstructured.Unstructured) any
		wantDefault, wantOwn any
	}{
		{
			"resources",
			"{requests: {cpu: 20m, memory: 32Mi}, limits: {memory: 128Mi}}", "{requests: {cpu: 500m}}",
			func(t *testing.T, d *unstructured.Unstructured) any { return container(t, d)["resources"] },
			map[string]any{"requests": map[string]any{"cpu": "20m", "memory": "32Mi"}, "limits": map[string]any{"memory": "128Mi"}},
			map[string]any{"requests": map[string]any{"cpu": "500m"}},
		},
		{
			"nodeSelector", "{kubernetes.io/os: linux}", "{pool: infra}",
			func(t *testing.T, d *unstructured.Unstructured) any { return podSpec(t, d)["nodeSelector"] },
			map[string]any{"kubernetes.io/os": "linux"}, map[string]any{"pool": "infra"},
		},
		{
			"tolerations", "[{key: a, operator: Exists}]", "[{key: b, operator: Exists}]",
			func(t *testing.T, d *unstructured.Unstructured) any { return podSpec(t, d)["tolerations"] },
			[]any{map[string]any{"key": "a", "operator": "Exists"}}, []any{map[string]any{"key": "b", "operator": "Exists"}},
		},
		{
			"affinity", "{podAffinity: {}}", "{podAntiAffinity: {}}",
			func(t *testing.T, d *unstructured.Unstructured) any { return podSpec(t, d)["affinity"] },
			map[string]any{"podAffinity": map[string]any{}}, map[string]any{"podAntiAffinity": map[string]any{}},
		},
		{
			"topologySpreadConstraints",
			"[{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}]",
			"[{maxSkew: 2, topologyKey: host, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {tier: control}}}]",
			func(t *testing.T, d *unstructured.Unstructured) any {
				tsc := podSpec(t, d)["topologySpreadConstraints"].([]any)
				require.Len(t, tsc, 1)
				return tsc[0].(map[string]any)["topologyKey"]
			},
			"zone", "host",
		},
		{
			"podLabels", "{team: network}", "{tier: control}",
			func(t *testing.T, d *unstructured.Unstructured) any {
				l, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
				return []string{l["team"], l["tier"]}
			},
			[]string{"network", ""}, []string{"", "control"},
		},
		{
			"podAnnotations", "{a: one}", "{b: two}",
			func(t *testing.T, d *unstructured.Unstructured) any {
				a, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "annotations")
				return a
			},
			map[string]string{"a": "one"}, map[string]string{"b": "two"},
		},
		{
			"priorityClassName", "low", "high",
			func(t *testing.T, d *unstructured.Unstructured) any { return podSpec(t, d)["priorityClassName"] },
			"low", "high",
		},
		{
			// The given defaults are merged into the chart's (null drops a key),
			// a controller's own context replaces them whole.
			"securityContext", "{runAsUser: 1000, runAsGroup: null, seccompProfile: null}", "{runAsNonRoot: true}",
			func(t *testing.T, d *unstructured.Unstructured) any { return podSpec(t, d)["securityContext"] },
			map[string]any{"runAsNonRoot": true, "runAsUser": int64(1000)}, map[string]any{"runAsNonRoot": true},
		},
		{
			"containerSecurityContext", "{privileged: false}", "{privileged: true}",
			func(t *testing.T, d *unstructured.Unstructured) any {
				sc, _ := container(t, d)["securityContext"].(map[string]any)
				return []any{sc["privileged"], sc["readOnlyRootFilesystem"]}
			},
			[]any{false, true}, []any{true, nil},
		},
		{
			"logLevel", "error", "debug",
			func(t *testing.T, d *unstructured.Unstructured) any { return flagValues(t, d, "zap-log-level") },
			[]string{"error"}, []string{"debug"},
		},
		{
			"logFormat", "json", "console",
			func(t *testing.T, d *unstructured.Unstructured) any { return flagValues(t, d, "zap-encoder") },
			[]string{"json"}, []string{"console"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			r := render(t, "defaults: {"+tt.field+": "+tt.defaults+"}\ncontrollers: {claim: {"+tt.field+": "+tt.claim+"}}")
			for _, c := range controllers {
				want := tt.wantDefault
				if c == "claim" {
					want = tt.wantOwn
				}
				assert.Equal(t, want, tt.get(t, deployment(t, r, c)), c)
			}
		})
	}
}

func TestLogFlags(t *testing.T) {
	tests := []struct {
		name, values           string
		wantLevel, wantEncoder []string
	}{
		{"default", "", []string{"info"}, []string{"json"}},
		{"named level, console", "defaults: {logLevel: error, logFormat: console}", []string{"error"}, []string{"console"}},
		{"verbosity as a number", "defaults: {logLevel: 4}", []string{"4"}, []string{"json"}},
		{"verbosity as a string", `defaults: {logLevel: "2"}`, []string{"2"}, []string{"json"}},
		{"empty keeps the binary's default", `defaults: {logLevel: "", logFormat: ""}`, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, tt.values)
			for _, c := range controllers {
				d := deployment(t, r, c)
				assert.Equal(t, tt.wantLevel, flagValues(t, d, "zap-log-level"), c)
				assert.Equal(t, tt.wantEncoder, flagValues(t, d, "zap-encoder"), c)
			}
		})
	}

	// extraArgs come after the chart's flags, so a repeated flag there wins.
	r := render(t, `controllers: {service: {extraArgs: ["--zap-log-level=debug"]}}`)
	assert.Equal(t, []string{"info", "debug"}, flagValues(t, deployment(t, r, "service"), "zap-log-level"))
}

func TestLeaderElectionFlags(t *testing.T) {
	// None by default: the binaries' own durations apply.
	r := render(t, "")
	for _, c := range controllers {
		for _, f := range []string{"leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period"} {
			assert.Empty(t, flagValues(t, deployment(t, r, c), f), "%s %s", c, f)
		}
	}

	// Each duration is overridden on its own.
	r = render(t, `
defaults: {leaderElection: {leaseDuration: 60s, renewDeadline: 40s}}
controllers: {ipaddress: {leaderElection: {renewDeadline: 30s, retryPeriod: 500ms}}}
`)
	for _, c := range controllers {
		d := deployment(t, r, c)
		want := map[string][]string{
			"leader-elect-lease-duration": {"60s"},
			"leader-elect-renew-deadline": {"40s"},
			"leader-elect-retry-period":   nil,
		}
		if c == "ipaddress" {
			want["leader-elect-renew-deadline"] = []string{"30s"}
			want["leader-elect-retry-period"] = []string{"500ms"}
		}
		for f, v := range want {
			assert.Equal(t, v, flagValues(t, d, f), "%s %s", c, f)
		}
		// Next to the lease's namespace, before the controller's own flags.
		args := container(t, d)["args"].([]any)
		assert.Equal(t, "--leader-election-namespace="+releaseNS, args[1])
		assert.True(t, strings.HasPrefix(args[2].(string), "--leader-elect-"), c)
	}
}

func TestTopologySpreadConstraints(t *testing.T) {
	r := render(t, `
defaults:
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, minDomains: 2}
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: ScheduleAnyway
      labelSelector: {matchLabels: {team: network}}
      matchLabelKeys: [pod-template-hash]
`)
	for _, c := range controllers {
		assert.Equal(t, []any{
			map[string]any{
				"maxSkew": int64(1), "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule", "minDomains": int64(2),
				// Filled in: each controller's constraint counts its own pods.
				"labelSelector": map[string]any{"matchLabels": selectorOf(c)},
			},
			map[string]any{
				"maxSkew": int64(1), "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
				"labelSelector":  map[string]any{"matchLabels": map[string]any{"team": "network"}},
				"matchLabelKeys": []any{"pod-template-hash"},
			},
		}, podSpec(t, deployment(t, r, c))["topologySpreadConstraints"], c)
	}
	assert.NotContains(t, podSpec(t, deployment(t, render(t, ""), "claim")), "topologySpreadConstraints")
}

func TestPodLabelsNeverReplaceTheChartsLabels(t *testing.T) {
	r := render(t, `defaults: {podLabels: {app.kubernetes.io/component: other, app.kubernetes.io/instance: other, team: network}}`)
	for _, c := range controllers {
		labels, _, _ := unstructured.NestedMap(deployment(t, r, c).Object, "spec", "template", "metadata", "labels")
		for k, v := range selectorOf(c) {
			assert.Equal(t, v, labels[k], "%s %s", c, k)
		}
		assert.Equal(t, "network", labels["team"])
	}
}

func TestImage(t *testing.T) {
	const digest = "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
	tests := []struct {
		name, values, wantImage, wantPolicy string
	}{
		{"default", "", "ghcr.io/cozystack/metallb-iad:main", "IfNotPresent"},
		{"tag", "image: {tag: v1.2.3}", "ghcr.io/cozystack/metallb-iad:v1.2.3", "IfNotPresent"},
		{"digest, tag ignored", "image: {repository: r.example/iad, tag: v1.2.3, digest: " + digest + "}", "r.example/iad@" + digest, "IfNotPresent"},
		{"pull policy", "image: {pullPolicy: Always}", "ghcr.io/cozystack/metallb-iad:main", "Always"},
		{"the former top-level pull policy", "imagePullPolicy: Never", "ghcr.io/cozystack/metallb-iad:main", "Never"},
		{"the former top-level pull policy wins", "imagePullPolicy: IfNotPresent\nimage: {pullPolicy: Always}", "ghcr.io/cozystack/metallb-iad:main", "IfNotPresent"},
		{"no pull policy: Kubernetes decides", `image: {pullPolicy: ""}`, "ghcr.io/cozystack/metallb-iad:main", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, tt.values)
			for _, c := range controllers {
				ct := container(t, deployment(t, r, c))
				assert.Equal(t, tt.wantImage, ct["image"], c)
				if tt.wantPolicy == "" {
					assert.NotContains(t, ct, "imagePullPolicy", c)
				} else {
					assert.Equal(t, tt.wantPolicy, ct["imagePullPolicy"], c)
				}
			}
		})
	}
}

// TestSecurityContextOverride: the fixed IDs can be dropped (as OpenShift,
// which assigns its own, needs), and the contexts replaced or left out.
func TestSecurityContextOverride(t *testing.T) {
	tests := []struct {
		name, values string
		// wantPod and wantContainer per controller; nil: no context rendered.
		wantPod, wantContainer func(c string) map[string]any
	}{
		{
			"fixed IDs dropped with null",
			"defaults:\n  securityContext: {runAsUser: null, runAsGroup: null}\n  containerSecurityContext: {runAsUser: null, runAsGroup: null}",
			func(string) map[string]any {
				return map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}
			},
			func(string) map[string]any {
				return map[string]any{
					"runAsNonRoot": true, "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false,
					"capabilities": map[string]any{"drop": []any{"ALL"}}, "seccompProfile": map[string]any{"type": "RuntimeDefault"},
				}
			},
		},
		{
			"no contexts at all",
			"defaults: {securityContext: null, containerSecurityContext: null}",
			func(string) map[string]any { return nil },
			func(string) map[string]any { return nil },
		},
		{
			"one controller's context replaced whole",
			"controllers: {class: {securityContext: {runAsUser: 1001}, containerSecurityContext: {privileged: false}}}",
			func(c string) map[string]any {
				if c == "class" {
					return map[string]any{"runAsUser": int64(1001)}
				}
				return map[string]any{"runAsNonRoot": true, "runAsUser": int64(65532), "runAsGroup": int64(65532), "seccompProfile": map[string]any{"type": "RuntimeDefault"}}
			},
			func(c string) map[string]any {
				if c == "class" {
					return map[string]any{"privileged": false}
				}
				return map[string]any{
					"runAsNonRoot": true, "runAsUser": int64(65532), "runAsGroup": int64(65532),
					"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false,
					"capabilities": map[string]any{"drop": []any{"ALL"}}, "seccompProfile": map[string]any{"type": "RuntimeDefault"},
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, tt.values)
			for _, c := range controllers {
				d := deployment(t, r, c)
				checkContext(t, podSpec(t, d), tt.wantPod(c), c+" pod")
				checkContext(t, container(t, d), tt.wantContainer(c), c+" container")
			}
		})
	}
}

func checkContext(t *testing.T, in map[string]any, want map[string]any, what string) {
	t.Helper()
	if want == nil {
		assert.NotContains(t, in, "securityContext", what)
		return
	}
	assert.Equal(t, want, in["securityContext"], what)
}

func TestConventionsSchema(t *testing.T) {
	tests := []schemaCase{
		{"every shared default", sharedDefaults, ""},
		{"every setting per controller", "controllers:\n  claim:" + strings.ReplaceAll(everySetting, "\n", "\n  "), ""},
		{"OpenShift: IDs dropped", "defaults: {securityContext: {runAsUser: null}, containerSecurityContext: {runAsUser: null, runAsGroup: null}}", ""},
		{"no contexts", "defaults: {securityContext: null, containerSecurityContext: null}", ""},
		{"digest", "image: {digest: sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945}", ""},
		{"verbosity", "controllers: {claim: {logLevel: 3}}", ""},
		{"sub-second lease timing", "defaults: {leaderElection: {retryPeriod: 1.5s}}", ""},
		{"monitoring and tenant roles", `
metrics:
  podMonitor: {enabled: true, interval: 30s, scrapeTimeout: 10s, labels: {release: prom}}
  prometheusRule:
    enabled: true
    labels: {release: prom}
    additionalRules:
      - {alert: Down, expr: up == 0, for: 5m, keep_firing_for: 1m, labels: {severity: warning}, annotations: {summary: down}}
      - {record: "job:up:sum", expr: sum by (job) (up)}
tenantRoles: {enabled: false}
`, ""},
		{"misspelt defaults key", "defaults: {resource: {}}", "resource"},
		{"misspelt PodMonitor key", "metrics: {podMonitor: {enable: true}}", "enable"},
		{"PodMonitor interval without a unit", `metrics: {podMonitor: {interval: "30"}}`, "interval"},
		{"misspelt PrometheusRule key", "metrics: {prometheusRule: {additionalRule: []}}", "additionalRule"},
		{"rule without expr", "metrics: {prometheusRule: {additionalRules: [{alert: Down}]}}", "expr"},
		{"rule neither alert nor record", "metrics: {prometheusRule: {additionalRules: [{expr: up}]}}", "additionalRules"},
		{"misspelt rule key", "metrics: {prometheusRule: {additionalRules: [{alert: Down, expr: up, annotation: {}}]}}", "annotation"},
		{"tenantRoles.enabled not a boolean", `tenantRoles: {enabled: "yes"}`, "enabled"},
		{"misspelt tenantRoles key", "tenantRoles: {enable: true}", "enable"},
		{"unknown top-level block", "default: {logLevel: info}", "default"},
		{"unknown log level", "defaults: {logLevel: verbose}", "logLevel"},
		{"zero verbosity", "defaults: {logLevel: 0}", "logLevel"},
		{"unknown log format", "controllers: {class: {logFormat: text}}", "logFormat"},
		{"duration without a unit", "defaults: {leaderElection: {leaseDuration: \"15\"}}", "leaseDuration"},
		{"misspelt leader-election key", "defaults: {leaderElection: {lease: 15s}}", "lease"},
		{"misspelt security context key", "defaults: {securityContext: {runAsUSer: 1}}", "runAsUSer"},
		{"misspelt container security context key", "controllers: {claim: {containerSecurityContext: {readOnlyRootFS: true}}}", "readOnlyRootFS"},
		{"constraint without topologyKey", "defaults: {topologySpreadConstraints: [{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]}", "topologyKey"},
		{"unknown whenUnsatisfiable", "defaults: {topologySpreadConstraints: [{maxSkew: 1, topologyKey: k, whenUnsatisfiable: Maybe}]}", "whenUnsatisfiable"},
		{"pod label not a string", "defaults: {podLabels: {tier: {a: b}}}", "podLabels"},
		{"malformed digest", "image: {digest: latest}", "digest"},
		{"unknown image pull policy", "image: {pullPolicy: Sometimes}", "pullPolicy"},
	}
	checkSchema(t, tests)
}

func TestTenantRoles(t *testing.T) {
	claimsRule := func(verbs ...any) []any {
		return []any{map[string]any{
			"apiGroups": []any{"local.sdn.cozystack.io"},
			"resources": []any{"ipaddressclaims"},
			"verbs":     verbs,
		}}
	}
	tests := []struct {
		name       string
		rel        Release
		values     string
		wantPrefix string // empty: no tenant roles
	}{
		{"default", Release{Name: "metallb-iad"}, "", "metallb-iad"},
		{"the chart's fullname", Release{Name: "edge"}, "", "edge-metallb-iad"},
		{"fullnameOverride", Release{Name: "edge"}, "fullnameOverride: iad", "iad"},
		{"disabled", Release{Name: "metallb-iad"}, "tenantRoles: {enabled: false}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Render(tt.rel, tt.values)
			require.NoError(t, err)
			var tenant []*unstructured.Unstructured
			for _, o := range r.Find("ClusterRole") {
				if strings.Contains(o.GetName(), "-claims-") {
					tenant = append(tenant, o)
				}
			}
			if tt.wantPrefix == "" {
				assert.Empty(t, tenant)
				return
			}
			assert.Len(t, tenant, 2)

			edit := must(t, r, "ClusterRole", tt.wantPrefix+"-claims-edit")
			assert.Equal(t, "true", edit.GetLabels()["rbac.authorization.k8s.io/aggregate-to-admin"])
			assert.Equal(t, "true", edit.GetLabels()["rbac.authorization.k8s.io/aggregate-to-edit"])
			assert.NotContains(t, edit.GetLabels(), "rbac.authorization.k8s.io/aggregate-to-view")
			assert.Equal(t, claimsRule("create", "update", "patch", "delete", "get", "list", "watch"), edit.Object["rules"])

			view := must(t, r, "ClusterRole", tt.wantPrefix+"-claims-view")
			assert.Equal(t, "true", view.GetLabels()["rbac.authorization.k8s.io/aggregate-to-view"])
			assert.NotContains(t, view.GetLabels(), "rbac.authorization.k8s.io/aggregate-to-admin")
			assert.NotContains(t, view.GetLabels(), "rbac.authorization.k8s.io/aggregate-to-edit")
			assert.Equal(t, claimsRule("get", "list", "watch"), view.Object["rules"])

			for _, o := range tenant {
				assert.Empty(t, o.GetNamespace(), "cluster-scoped")
				assert.NotContains(t, o.Object, "aggregationRule", "aggregated into the built-in roles, not aggregating")
				assert.NotContains(t, fmt.Sprint(o.Object["rules"]), "ipaddresses", "the ledger is not the tenants'")
			}
		})
	}
}
