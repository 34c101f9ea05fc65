package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestServiceAccountAnnotations: none by default; defaults.serviceAccount's
// on every controller's ServiceAccount; a controller's own replace them
// whole, for that controller only.
func TestServiceAccountAnnotations(t *testing.T) {
	for _, c := range controllers {
		assert.Empty(t, must(t, render(t, ""), "ServiceAccount", "metallb-iad-"+c).GetAnnotations(), c)
	}

	r := render(t, `
defaults:
  serviceAccount:
    annotations: {iam.gke.io/gcp-service-account: iad@project.iam.gserviceaccount.com, team: network}
controllers:
  claim:
    serviceAccount:
      annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::111122223333:role/iad-claim"}
`)
	for _, c := range controllers {
		want := map[string]string{"iam.gke.io/gcp-service-account": "iad@project.iam.gserviceaccount.com", "team": "network"}
		if c == "claim" {
			want = map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/iad-claim"}
		}
		sa := must(t, r, "ServiceAccount", "metallb-iad-"+c)
		assert.Equal(t, want, sa.GetAnnotations(), c)
		// The pods still run as that ServiceAccount.
		assert.Equal(t, sa.GetName(), podSpec(t, deployment(t, r, c))["serviceAccountName"], c)
	}
}

// everyPart turns on every optional part of the chart.
const everyPart = `
installCRDs: true
placeholderNamespace: metallb-iad-holds
podDisruptionBudget: {enabled: true}
controllers: {claim: {replicas: 2}}
metrics:
  serviceMonitor: {enabled: true}
  prometheusRule: {enabled: true}
networkPolicy: {enabled: true}
`

// TestCommonLabels: commonLabels are on every object the chart renders, and
// on the pods, while the selectors keep the chart's labels only.
func TestCommonLabels(t *testing.T) {
	common := map[string]string{"app.kubernetes.io/part-of": "cozystack", "team": "network", "tier": "true"}
	r := render(t, everyPart+`
commonLabels: {app.kubernetes.io/part-of: cozystack, team: network, tier: "true"}
extraObjects:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: mine}}
`)
	kinds := map[string]bool{}
	for _, o := range r.Objects {
		if o.GetKind() == "ConfigMap" {
			assert.Empty(t, o.GetLabels(), "extraObjects are rendered as given")
			continue
		}
		kinds[o.GetKind()] = true
		for k, v := range common {
			assert.Equal(t, v, o.GetLabels()[k], "%s %s: label %s", o.GetKind(), o.GetName(), k)
		}
	}
	// The render did cover the optional parts.
	for _, k := range []string{"CustomResourceDefinition", "Namespace", "PodDisruptionBudget", "ServiceMonitor",
		"PrometheusRule", "NetworkPolicy", "ValidatingAdmissionPolicy", "IPAddressPool", "ClusterRole", "Role"} {
		assert.True(t, kinds[k], "no %s rendered", k)
	}

	for _, c := range controllers {
		d := deployment(t, r, c)
		sel, _, _ := unstructured.NestedMap(d.Object, "spec", "selector", "matchLabels")
		assert.Equal(t, selectorOf(c), sel, "%s: the selector is the chart's alone", c)
		pod, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
		for k, v := range common {
			assert.Equal(t, v, pod[k], "%s pod label %s", c, k)
		}
	}
	// The metrics Services and the NetworkPolicies select by the chart's labels alone.
	svc := must(t, r, "Service", "metallb-iad-claim-metrics")
	assert.Equal(t, selectorOf("claim"), svc.Object["spec"].(map[string]any)["selector"])
	np := must(t, r, "NetworkPolicy", "metallb-iad-claim")
	npSel, _, _ := unstructured.NestedMap(np.Object, "spec", "podSelector", "matchLabels")
	assert.Equal(t, selectorOf("claim"), npSel)
}

// TestCommonLabelsNeverReplaceTheChartsLabels: the schema refuses a
// commonLabels key the chart sets itself, and a render that skips the
// schema (helm install --skip-schema-validation) drops it.
func TestCommonLabelsNeverReplaceTheChartsLabels(t *testing.T) {
	const values = `commonLabels: {app.kubernetes.io/component: other, app.kubernetes.io/instance: other, helm.sh/chart: other, team: network}`
	_, err := Render(Release{}, values)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "commonLabels")

	ch, err := loader.Load(Dir())
	require.NoError(t, err)
	ch.Schema = nil
	r, err := RenderChart(ch, Release{Name: "metallb-iad", Namespace: releaseNS}, values)
	require.NoError(t, err)
	for _, c := range controllers {
		d := deployment(t, r, c)
		for _, labels := range []map[string]string{
			d.GetLabels(),
			must(t, r, "ServiceAccount", "metallb-iad-"+c).GetLabels(),
		} {
			for k, v := range selectorOf(c) {
				assert.Equal(t, v, labels[k], "%s %s", c, k)
			}
			assert.Equal(t, "metallb-iad-0.1.0", labels["helm.sh/chart"], c)
			assert.Equal(t, "network", labels["team"], c)
		}
		pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "metadata", "labels")
		for k, v := range selectorOf(c) {
			assert.Equal(t, v, pod[k], "%s pod %s", c, k)
		}
	}
}

// TestExtraObjects: each item, a map or a string, is rendered through tpl
// and added to the release as it is.
func TestExtraObjects(t *testing.T) {
	r := render(t, "")
	assert.Empty(t, r.Find("ConfigMap"))

	r = render(t, `
extraObjects:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: "{{ .Release.Name }}-extra"
      namespace: "{{ .Release.Namespace }}"
    data:
      prefix: '{{ include "metallb-iad.fullname" . }}'
  - |
    apiVersion: networking.k8s.io/v1
    kind: NetworkPolicy
    metadata:
      name: default-deny
      namespace: {{ .Release.Namespace }}
    spec:
      podSelector: {}
      policyTypes: [Ingress]
`)
	cm := must(t, r, "ConfigMap", "metallb-iad-extra")
	assert.Equal(t, releaseNS, cm.GetNamespace())
	assert.Equal(t, map[string]any{"prefix": "metallb-iad"}, cm.Object["data"])
	assert.Empty(t, cm.GetLabels(), "rendered as given")
	np := must(t, r, "NetworkPolicy", "default-deny")
	assert.Equal(t, releaseNS, np.GetNamespace())
	assert.Equal(t, []any{"Ingress"}, np.Object["spec"].(map[string]any)["policyTypes"])
}

// namedPorts returns a Deployment's container ports by name.
func namedPorts(t *testing.T, d *unstructured.Unstructured) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, p := range container(t, d)["ports"].([]any) {
		p := p.(map[string]any)
		out[p["name"].(string)] = p["containerPort"]
	}
	return out
}

// ingressPorts returns the port of each ingress rule of a NetworkPolicy,
// with the rule's peers (nil: any source).
func ingressPorts(t *testing.T, np *unstructured.Unstructured) map[string]any {
	t.Helper()
	out := map[string]any{}
	rules, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
	for _, r := range rules {
		r := r.(map[string]any)
		ports := r["ports"].([]any)
		require.Len(t, ports, 1)
		p := ports[0].(map[string]any)
		assert.Equal(t, "TCP", p["protocol"])
		out[p["port"].(string)] = r["from"]
	}
	return out
}

func TestNetworkPolicy(t *testing.T) {
	assert.Empty(t, render(t, "").Find("NetworkPolicy"), "off by default")

	t.Run("defaults", func(t *testing.T) {
		r := render(t, "networkPolicy: {enabled: true}")
		require.Len(t, r.Find("NetworkPolicy"), len(controllers))
		for _, c := range controllers {
			np := must(t, r, "NetworkPolicy", "metallb-iad-"+c)
			assert.Equal(t, releaseNS, np.GetNamespace())
			sel, _, _ := unstructured.NestedMap(np.Object, "spec", "podSelector", "matchLabels")
			assert.Equal(t, selectorOf(c), sel, c)
			// Both directions are closed but for the rules below.
			assert.Equal(t, []any{"Ingress", "Egress"}, np.Object["spec"].(map[string]any)["policyTypes"], c)

			// Ingress on the metrics and health ports only, from anywhere;
			// each names a port the controller's container declares.
			in := ingressPorts(t, np)
			assert.Equal(t, map[string]any{"metrics": nil, "health": nil}, in, c)
			ports := namedPorts(t, deployment(t, r, c))
			for name := range in {
				assert.Contains(t, ports, name, "%s: the policy's port %q is not the Deployment's", c, name)
			}

			// Egress: the API server's ports, to any address.
			egress, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
			assert.Equal(t, []any{map[string]any{"ports": []any{
				map[string]any{"port": int64(443), "protocol": "TCP"},
				map[string]any{"port": int64(6443), "protocol": "TCP"},
			}}}, egress, c)
		}
	})

	t.Run("named peers and the API server's endpoints", func(t *testing.T) {
		r := render(t, `
controllers: {class: {metricsBindAddress: "0"}, claim: {metricsBindAddress: ":9090"}}
networkPolicy:
  enabled: true
  apiServer: {cidrs: [192.0.2.10/32, "2001:db8::10/128"], ports: [6443]}
  egress:
    - to: [{ipBlock: {cidr: 198.51.100.0/24}}]
      ports: [{port: 3128, protocol: TCP}]
  metricsFrom:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}
      podSelector: {matchLabels: {app.kubernetes.io/name: prometheus}}
  healthFrom:
    - ipBlock: {cidr: 10.0.0.0/16}
`)
		prometheus := []any{map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}},
			"podSelector":       map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "prometheus"}},
		}}
		nodes := []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/16"}}}
		for _, c := range controllers {
			np := must(t, r, "NetworkPolicy", "metallb-iad-"+c)
			want := map[string]any{"metrics": prometheus, "health": nodes}
			if c == "class" {
				// Its metrics are off: no rule for them.
				want = map[string]any{"health": nodes}
			}
			in := ingressPorts(t, np)
			assert.Equal(t, want, in, c)
			ports := namedPorts(t, deployment(t, r, c))
			for name := range in {
				assert.Contains(t, ports, name, "%s: the policy's port %q is not the Deployment's", c, name)
			}
			if c == "claim" {
				assert.Equal(t, int64(9090), ports["metrics"], "the named port follows metricsBindAddress")
			}

			egress, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
			assert.Equal(t, []any{
				map[string]any{
					"ports": []any{map[string]any{"port": int64(6443), "protocol": "TCP"}},
					"to": []any{
						map[string]any{"ipBlock": map[string]any{"cidr": "192.0.2.10/32"}},
						map[string]any{"ipBlock": map[string]any{"cidr": "2001:db8::10/128"}},
					},
				},
				// The user's rules come after the API server's.
				map[string]any{
					"to":    []any{map[string]any{"ipBlock": map[string]any{"cidr": "198.51.100.0/24"}}},
					"ports": []any{map[string]any{"port": int64(3128), "protocol": "TCP"}},
				},
			}, egress, c)
		}
	})
}

func TestValuesConventionsSchema(t *testing.T) {
	checkSchema(t, []schemaCase{
		{"every convention", `
commonLabels: {app.kubernetes.io/part-of: cozystack}
defaults:
  serviceAccount: {annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::111122223333:role/iad"}}
  podLabels: {team: network}
  podAnnotations: {example.com/owner: network}
  priorityClassName: system-cluster-critical
controllers:
  claim:
    serviceAccount: {annotations: {iam.gke.io/gcp-service-account: claim@p.iam.gserviceaccount.com}}
    podLabels: {tier: control}
    podAnnotations: {example.com/owner: claims}
    priorityClassName: high
networkPolicy:
  enabled: true
  apiServer: {cidrs: [192.0.2.10/32, "2001:db8::/64"], ports: [6443]}
  egress:
    - to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}, podSelector: {matchLabels: {k8s-app: kube-dns}}}]
      ports: [{port: 53, protocol: UDP}, {port: dns-tcp, protocol: TCP}, {port: 30000, endPort: 32767}]
  metricsFrom: [{namespaceSelector: {matchExpressions: [{key: team, operator: In, values: [sre]}]}}]
  healthFrom: [{ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}}]
extraObjects:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}
  - "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}"
`, ""},
		{"ServiceAccount annotations not a map", `defaults: {serviceAccount: {annotations: [a]}}`, "annotations"},
		{"ServiceAccount annotation not a string", `controllers: {claim: {serviceAccount: {annotations: {a: 1}}}}`, "annotations"},
		{"misspelt ServiceAccount key", `defaults: {serviceAccount: {annotation: {a: b}}}`, "annotation"},
		{"ServiceAccount create is not the chart's", `controllers: {class: {serviceAccount: {create: false}}}`, "create"},
		{"commonLabels not a map", `commonLabels: [team]`, "commonLabels"},
		{"common label not a string", `commonLabels: {replicated: true}`, "commonLabels"},
		{"common label the chart sets", `commonLabels: {app.kubernetes.io/name: other}`, "commonLabels"},
		{"pod annotation not a string", `controllers: {service: {podAnnotations: {a: {b: c}}}}`, "podAnnotations"},
		{"priorityClassName not a string", `defaults: {priorityClassName: 1000}`, "priorityClassName"},
		{"extraObjects not a list", `extraObjects: {apiVersion: v1}`, "extraObjects"},
		{"extra object a number", `extraObjects: [42]`, "extraObjects"},
		{"networkPolicy.enabled not a boolean", `networkPolicy: {enabled: "yes"}`, "enabled"},
		{"misspelt networkPolicy key", `networkPolicy: {metricFrom: []}`, "metricFrom"},
		{"API server port a string", `networkPolicy: {apiServer: {ports: ["6443"]}}`, "ports"},
		{"API server port out of range", `networkPolicy: {apiServer: {ports: [70000]}}`, "ports"},
		{"no API server port", `networkPolicy: {apiServer: {ports: []}}`, "ports"},
		{"API server address without a prefix length", `networkPolicy: {apiServer: {cidrs: [192.0.2.10]}}`, "cidrs"},
		{"misspelt peer key", `networkPolicy: {metricsFrom: [{namespaceSelectors: {}}]}`, "namespaceSelectors"},
		{"empty peer", `networkPolicy: {healthFrom: [{}]}`, "healthFrom"},
		{"ipBlock with a selector", `networkPolicy: {healthFrom: [{ipBlock: {cidr: 10.0.0.0/8}, podSelector: {}}]}`, "healthFrom"},
		{"egress rule not a map", `networkPolicy: {egress: [0.0.0.0/0]}`, "egress"},
		{"unknown egress protocol", `networkPolicy: {egress: [{ports: [{port: 53, protocol: ICMP}]}]}`, "protocol"},
	})
}

// TestValuesAreDocumented: the chart's README names every top-level value,
// every shared default and every per-controller value.
func TestValuesAreDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(Dir(), "values.yaml"))
	require.NoError(t, err)
	vals := map[string]any{}
	require.NoError(t, yaml.Unmarshal(b, &vals))
	readme, err := os.ReadFile(filepath.Join(Dir(), "README.md"))
	require.NoError(t, err)
	doc := string(readme)

	documented := func(key string) bool {
		// As the key itself or as the last part of a dotted path.
		return strings.Contains(doc, "`"+key+"`") || strings.Contains(doc, "`"+key+".") ||
			strings.Contains(doc, "."+key+"`") || strings.Contains(doc, "."+key+".")
	}
	for k := range vals {
		assert.True(t, documented(k), "values.yaml's %s is not in the README", k)
	}
	defaults := vals["defaults"].(map[string]any)
	for k := range defaults {
		assert.True(t, documented(k), "defaults.%s is not in the README", k)
	}
	// The chart's own nested settings (the other maps are Kubernetes types).
	for _, k := range []string{"leaderElection", "serviceAccount"} {
		for sub := range defaults[k].(map[string]any) {
			assert.True(t, documented(sub), "defaults.%s.%s is not in the README", k, sub)
		}
	}
	for k := range vals["controllers"].(map[string]any)["claim"].(map[string]any) {
		assert.True(t, documented(k), "controllers.<name>.%s is not in the README", k)
	}
	for k := range vals["networkPolicy"].(map[string]any) {
		assert.True(t, documented("networkPolicy."+k), "networkPolicy.%s is not in the README", k)
	}
}
