package chart

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/manifests"
)

// controllers are the four controllers, each rendered as its own set of objects.
var controllers = []string{"class", "claim", "service", "ipaddress"}

const releaseNS = "metallb-iad-system"

// render renders the chart as release "metallb-iad" in releaseNS and fails
// the test on error.
func render(t *testing.T, values string) *Rendered {
	t.Helper()
	r, err := Render(Release{Name: "metallb-iad", Namespace: releaseNS}, values)
	require.NoError(t, err)
	return r
}

// must returns the object of a kind and name, failing the test if absent.
func must(t *testing.T, r *Rendered, kind, name string) *unstructured.Unstructured {
	t.Helper()
	o := r.Get(kind, name)
	require.NotNil(t, o, "%s %s is not rendered", kind, name)
	return o
}

// container returns the one container of a Deployment.
func container(t *testing.T, d *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, found, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	require.True(t, found)
	require.Len(t, cs, 1)
	return cs[0].(map[string]any)
}

func podSpec(t *testing.T, d *unstructured.Unstructured) map[string]any {
	t.Helper()
	ps, found, err := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	require.NoError(t, err)
	require.True(t, found)
	return ps
}

func names4(r *Rendered, kind string) []string {
	var out []string
	for _, o := range r.Find(kind) {
		out = append(out, o.GetName())
	}
	return out
}

func TestDefaultRenderHasOneSetPerController(t *testing.T) {
	r := render(t, "")

	want := []string{"metallb-iad-class", "metallb-iad-claim", "metallb-iad-service", "metallb-iad-ipaddress"}
	for _, kind := range []string{"Deployment", "ServiceAccount", "ClusterRoleBinding"} {
		assert.ElementsMatch(t, want, names4(r, kind), kind)
	}
	// Besides the controllers' own, the tenants' aggregated roles and the
	// role that may read the (secure) metrics, bound to no one by default.
	assert.ElementsMatch(t, append(slices.Clone(want), "metallb-iad-claims-edit", "metallb-iad-claims-view", "metallb-iad-metrics-reader"), names4(r, "ClusterRole"))
	var leaseNames []string
	for _, n := range want {
		leaseNames = append(leaseNames, n+"-leader-election")
	}
	// The claim controller creates and deletes placeholders only in the
	// placeholder namespace (the release namespace by default). The
	// IPAddress controller's create and delete are cluster-wide: it also
	// clears MetalLB's stale allocations of deleted tenant Services.
	placeholderRoles := append(slices.Clone(leaseNames), "metallb-iad-claim")
	// The three controllers that derive sharing keys read their Secret.
	roles := append(slices.Clone(placeholderRoles), "metallb-iad-claim-sharing-key", "metallb-iad-service-sharing-key", "metallb-iad-ipaddress-sharing-key")
	// MetalLB's kinds, only in MetalLB's namespace: the class controller
	// writes its pools and advertisements, the service and ipaddress
	// controllers read the pools.
	metallbRoles := []string{"metallb-iad-class", "metallb-iad-service", "metallb-iad-ipaddress"}
	roles = append(roles, metallbRoles...)
	assert.ElementsMatch(t, roles, names4(r, "Role"))
	assert.ElementsMatch(t, roles, names4(r, "RoleBinding"))

	// Nothing optional is rendered by default; the admission policy is on.
	for _, kind := range []string{"Namespace", "CustomResourceDefinition", "Service", "ServiceMonitor", "PodDisruptionBudget"} {
		assert.Empty(t, r.Find(kind), kind)
	}
	for _, p := range []string{"metallb-iad-reserved-service-fields", "metallb-iad-driver-service-writes"} {
		must(t, r, "ValidatingAdmissionPolicy", p)
		must(t, r, "ValidatingAdmissionPolicyBinding", p)
	}
	// The chart renders no sharing key: the controllers make it.
	assert.Empty(t, r.Find("Secret"))
	// Every namespaced object is in the release namespace.
	for _, o := range r.Objects {
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			assert.Empty(t, o.GetNamespace(), o.GetName())
		case "IPAddressPool":
			assert.Equal(t, "metallb-system", o.GetNamespace(), "the parking pool is MetalLB configuration")
		case "Role", "RoleBinding":
			want := releaseNS
			if slices.Contains(metallbRoles, o.GetName()) {
				want = "metallb-system"
			}
			assert.Equal(t, want, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
		default:
			assert.Equal(t, releaseNS, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
		}
	}
	assert.Contains(t, r.Notes, "metallb-iad-claim")
}

func TestDefaultDeployments(t *testing.T) {
	r := render(t, "")
	for _, c := range controllers {
		t.Run(c, func(t *testing.T) {
			name := "metallb-iad-" + c
			d := must(t, r, "Deployment", name)

			replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
			assert.Equal(t, int64(1), replicas)
			sel, _, _ := unstructured.NestedStringMap(d.Object, "spec", "selector", "matchLabels")
			assert.Equal(t, map[string]string{
				"app.kubernetes.io/name":      "metallb-iad",
				"app.kubernetes.io/instance":  "metallb-iad",
				"app.kubernetes.io/component": c,
			}, sel)
			podLabels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
			for k, v := range sel {
				assert.Equal(t, v, podLabels[k], "pod label %s", k)
			}

			ps := podSpec(t, d)
			assert.Equal(t, name, ps["serviceAccountName"])
			assert.Equal(t, map[string]any{
				"runAsNonRoot":   true,
				"runAsUser":      int64(65532),
				"runAsGroup":     int64(65532),
				"seccompProfile": map[string]any{"type": "RuntimeDefault"},
			}, ps["securityContext"])
			for _, absent := range []string{"nodeSelector", "tolerations", "affinity", "priorityClassName", "imagePullSecrets"} {
				assert.NotContains(t, ps, absent)
			}

			ct := container(t, d)
			assert.Equal(t, "ghcr.io/cozystack/metallb-iad:main", ct["image"])
			assert.Equal(t, "IfNotPresent", ct["imagePullPolicy"])
			assert.Equal(t, []any{"/" + c}, ct["command"])
			args := []any{
				"--leader-elect=true",
				"--leader-election-namespace=" + releaseNS,
				"--metrics-bind-address=:8080",
				"--metrics-secure=true",
				"--health-probe-bind-address=:8081",
				"--placeholder-namespace=" + releaseNS,
				"--metallb-namespace=metallb-system",
			}
			// The controllers that park holds and attach Services name the parking pool.
			if c == "service" || c == "ipaddress" {
				args = append(args, "--parking-pool=metallb-iad-parking")
			}
			// The controllers that write sharing keys read their secret, and
			// the first to start creates it; nothing is mounted.
			if c != "class" {
				args = append(args, "--sharing-key-secret=metallb-iad-sharing-key", "--sharing-key-create=true")
			}
			assert.NotContains(t, ct, "volumeMounts")
			assert.NotContains(t, ps, "volumes")
			args = append(args, "--zap-log-level=info", "--zap-encoder=json")
			assert.Equal(t, args, ct["args"])
			assert.Equal(t, []any{map[string]any{
				"name": "POD_NAMESPACE",
				"valueFrom": map[string]any{
					"fieldRef": map[string]any{"fieldPath": "metadata.namespace"},
				},
			}}, ct["env"])
			assert.Equal(t, []any{
				map[string]any{"name": "metrics", "containerPort": int64(8080), "protocol": "TCP"},
				map[string]any{"name": "health", "containerPort": int64(8081), "protocol": "TCP"},
			}, ct["ports"])

			sc := ct["securityContext"].(map[string]any)
			assert.Equal(t, true, sc["runAsNonRoot"])
			assert.Equal(t, int64(65532), sc["runAsUser"])
			assert.Equal(t, true, sc["readOnlyRootFilesystem"])
			assert.Equal(t, false, sc["allowPrivilegeEscalation"])
			assert.Equal(t, map[string]any{"drop": []any{"ALL"}}, sc["capabilities"])
			assert.Equal(t, map[string]any{"type": "RuntimeDefault"}, sc["seccompProfile"])

			live, _, _ := unstructured.NestedMap(ct, "livenessProbe", "httpGet")
			assert.Equal(t, map[string]any{"path": "/healthz", "port": "health"}, live)
			ready, _, _ := unstructured.NestedMap(ct, "readinessProbe", "httpGet")
			assert.Equal(t, map[string]any{"path": "/readyz", "port": "health"}, ready)

			assert.Equal(t, map[string]any{
				"requests": map[string]any{"cpu": "10m", "memory": "64Mi"},
				"limits":   map[string]any{"memory": "256Mi"},
			}, ct["resources"])
		})
	}
}

func TestDefaultRBAC(t *testing.T) {
	r := render(t, "")
	for _, c := range controllers {
		t.Run(c, func(t *testing.T) {
			name := "metallb-iad-" + c
			subject := []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": releaseNS}}

			sa := must(t, r, "ServiceAccount", name)
			assert.Equal(t, releaseNS, sa.GetNamespace())

			crb := must(t, r, "ClusterRoleBinding", name)
			ref, _, _ := unstructured.NestedStringMap(crb.Object, "roleRef")
			assert.Equal(t, map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}, ref)
			assert.Equal(t, subject, crb.Object["subjects"])

			lease := name + "-leader-election"
			role := must(t, r, "Role", lease)
			assert.Equal(t, []any{
				map[string]any{"apiGroups": []any{"coordination.k8s.io"}, "resources": []any{"leases"}, "verbs": []any{"create"}},
				map[string]any{"apiGroups": []any{"coordination.k8s.io"}, "resources": []any{"leases"},
					"resourceNames": []any{names.LeaseID(c)}, "verbs": []any{"get", "update", "patch"}},
				map[string]any{"apiGroups": []any{""}, "resources": []any{"events"}, "verbs": []any{"create", "patch"}},
			}, role.Object["rules"])

			rb := must(t, r, "RoleBinding", lease)
			assert.Equal(t, releaseNS, rb.GetNamespace())
			ref, _, _ = unstructured.NestedStringMap(rb.Object, "roleRef")
			assert.Equal(t, map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": lease}, ref)
			assert.Equal(t, subject, rb.Object["subjects"])
		})
	}
}

// readYAML reads a project file into a generic map.
func readYAML(t *testing.T, rel string) (map[string]any, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(manifests.Root(), rel))
	require.NoError(t, err)
	m := map[string]any{}
	require.NoError(t, utilyaml.Unmarshal(b, &m))
	return m, b
}

// TestClusterRolesAreTheMarkers checks that each controller's ClusterRole
// grants exactly what controller-gen derived from its RBAC markers, and that
// the chart's copy of that output is current.
func TestClusterRolesAreTheMarkers(t *testing.T) {
	r := render(t, "")
	for _, c := range controllers {
		t.Run(c, func(t *testing.T) {
			generated, genBytes := readYAML(t, filepath.Join("config", "rbac", c, "role.yaml"))
			require.NotEmpty(t, generated["rules"], "config/rbac/%s/role.yaml has no rules", c)

			_, chartBytes := readYAML(t, filepath.Join("chart", "metallb-iad", "files", "rbac", c+".yaml"))
			assert.Equal(t, string(genBytes), string(chartBytes),
				"chart/metallb-iad/files/rbac/%s.yaml is stale: run `make manifests`", c)

			role := must(t, r, "ClusterRole", "metallb-iad-"+c)
			assert.Equal(t, generated["rules"], role.Object["rules"])

			// The namespaced markers' Roles, if any, are rendered as they
			// are, each in the namespace the values give the one it names.
			roles := map[string]map[string]any{}
			for _, doc := range strings.Split(string(genBytes), "\n---\n") {
				m := map[string]any{}
				require.NoError(t, utilyaml.Unmarshal([]byte(doc), &m))
				if m["kind"] == "Role" {
					roles[m["metadata"].(map[string]any)["namespace"].(string)] = m
				}
			}
			other := render(t, "{placeholderNamespace: iad-placeholders, metallbNamespace: lb-system}")
			moved := map[string]string{"metallb-iad-system": "iad-placeholders", "metallb-system": "lb-system"}
			require.Subset(t, []string{"metallb-iad-system", "metallb-system"}, slices.Collect(maps.Keys(roles)))
			var found []string
			for _, o := range r.Find("Role") {
				if o.GetName() == "metallb-iad-"+c {
					found = append(found, o.GetNamespace())
				}
			}
			assert.ElementsMatch(t, slices.Collect(maps.Keys(roles)), found)
			for ns, generated := range roles {
				for _, o := range r.Find("Role") {
					if o.GetName() == "metallb-iad-"+c && o.GetNamespace() == ns {
						assert.Equal(t, generated["rules"], o.Object["rules"], ns)
					}
				}
				for _, kind := range []string{"Role", "RoleBinding"} {
					n := 0
					for _, o := range other.Find(kind) {
						if o.GetName() == "metallb-iad-"+c && o.GetNamespace() == moved[ns] {
							n++
						}
					}
					assert.Equal(t, 1, n, "%s of %s in %s", kind, ns, moved[ns])
				}
			}
		})
	}
}

// TestChartCRDsAreCurrent checks the chart's copy of the CRDs against config/crd/bases.
func TestChartCRDsAreCurrent(t *testing.T) {
	bases, err := filepath.Glob(filepath.Join(manifests.Root(), "config", "crd", "bases", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, bases, 3)
	copies, err := filepath.Glob(filepath.Join(Dir(), "files", "crds", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, copies, len(bases), "chart/metallb-iad/files/crds is stale: run `make manifests`")
	for _, p := range bases {
		want, err := os.ReadFile(p)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(Dir(), "files", "crds", filepath.Base(p)))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "chart copy of %s is stale: run `make manifests`", filepath.Base(p))
	}
}

func TestInstallCRDs(t *testing.T) {
	r := render(t, "installCRDs: true")
	assert.ElementsMatch(t, []string{
		"ipaddressclasses.local.sdn.cozystack.io",
		"ipaddressclaims.local.sdn.cozystack.io",
		"ipaddresses.local.sdn.cozystack.io",
	}, names4(r, "CustomResourceDefinition"))
	for _, crd := range r.Find("CustomResourceDefinition") {
		file := fmt.Sprintf("config/crd/bases/local.sdn.cozystack.io_%s.yaml", strings.TrimSuffix(crd.GetName(), ".local.sdn.cozystack.io"))
		want, _ := readYAML(t, file)
		// helm uninstall leaves them, and every claim and address with them.
		assert.Equal(t, "keep", crd.GetAnnotations()["helm.sh/resource-policy"], crd.GetName())
		got := crd.DeepCopy()
		ann := got.GetAnnotations()
		delete(ann, "helm.sh/resource-policy")
		got.SetAnnotations(ann)
		assert.Equal(t, want, got.Object, "%s renders as %s with the keep policy", crd.GetName(), file)
	}
}

func TestPerControllerValuesApplyToThatControllerOnly(t *testing.T) {
	r := render(t, `
controllers:
  claim:
    replicas: 3
    leaderElect: false
    metricsBindAddress: ":9090"
    resources:
      requests: {cpu: 50m, memory: 100Mi}
      limits: {cpu: "1", memory: 1Gi}
    nodeSelector: {node-role.kubernetes.io/control-plane: ""}
    tolerations:
      - {key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}
    affinity:
      podAntiAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            podAffinityTerm:
              topologyKey: kubernetes.io/hostname
              labelSelector: {matchLabels: {app.kubernetes.io/component: claim}}
    priorityClassName: system-cluster-critical
    extraArgs: ["--zap-log-level=debug", "--zap-devel"]
`)
	claim := must(t, r, "Deployment", "metallb-iad-claim")
	replicas, _, _ := unstructured.NestedInt64(claim.Object, "spec", "replicas")
	assert.Equal(t, int64(3), replicas)
	ps := podSpec(t, claim)
	assert.Equal(t, map[string]any{"node-role.kubernetes.io/control-plane": ""}, ps["nodeSelector"])
	assert.Equal(t, []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}}, ps["tolerations"])
	topo, _, _ := unstructured.NestedSlice(ps, "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
	assert.Len(t, topo, 1)
	assert.Equal(t, "system-cluster-critical", ps["priorityClassName"])
	ct := container(t, claim)
	assert.Equal(t, []any{
		"--leader-elect=false",
		"--leader-election-namespace=" + releaseNS,
		"--metrics-bind-address=:9090",
		"--metrics-secure=true",
		"--health-probe-bind-address=:8081",
		"--placeholder-namespace=" + releaseNS,
		"--metallb-namespace=metallb-system",
		"--sharing-key-secret=metallb-iad-sharing-key",
		"--sharing-key-create=true",
		"--zap-log-level=info",
		"--zap-encoder=json",
		"--zap-log-level=debug",
		"--zap-devel",
	}, ct["args"])
	assert.Contains(t, ct["ports"], map[string]any{"name": "metrics", "containerPort": int64(9090), "protocol": "TCP"})
	assert.Equal(t, map[string]any{
		"requests": map[string]any{"cpu": "50m", "memory": "100Mi"},
		"limits":   map[string]any{"cpu": "1", "memory": "1Gi"},
	}, ct["resources"])

	// The other three keep every default.
	def := render(t, "")
	for _, c := range []string{"class", "service", "ipaddress"} {
		assert.Equal(t, must(t, def, "Deployment", "metallb-iad-"+c).Object, must(t, r, "Deployment", "metallb-iad-"+c).Object, c)
	}
}

func TestMetricsDisabled(t *testing.T) {
	r := render(t, `controllers: {class: {metricsBindAddress: "0"}}`)
	ct := container(t, must(t, r, "Deployment", "metallb-iad-class"))
	assert.Contains(t, ct["args"], "--metrics-bind-address=0")
	assert.Equal(t, []any{map[string]any{"name": "health", "containerPort": int64(8081), "protocol": "TCP"}}, ct["ports"])
}

func TestGlobalValues(t *testing.T) {
	r := render(t, `
image: {repository: registry.example/iad, tag: v1.2.3}
imagePullPolicy: Always
imagePullSecrets: [{name: regcred}]
metallbNamespace: lb
`)
	for _, c := range controllers {
		d := must(t, r, "Deployment", "metallb-iad-"+c)
		ct := container(t, d)
		assert.Equal(t, "registry.example/iad:v1.2.3", ct["image"])
		assert.Equal(t, "Always", ct["imagePullPolicy"])
		assert.Contains(t, ct["args"], "--metallb-namespace=lb")
		assert.Equal(t, []any{map[string]any{"name": "regcred"}}, podSpec(t, d)["imagePullSecrets"])
	}
}

// TestMetalLBLoadBalancerClass: the class reaches the service controller
// alone, and only when set.
func TestMetalLBLoadBalancerClass(t *testing.T) {
	for _, c := range controllers {
		assert.NotContains(t, fmt.Sprint(container(t, must(t, render(t, ""), "Deployment", "metallb-iad-"+c))["args"]), "--metallb-load-balancer-class", c)
	}
	r := render(t, `metallbLoadBalancerClass: metallb.io/lb`)
	for _, c := range controllers {
		args := fmt.Sprint(container(t, must(t, r, "Deployment", "metallb-iad-"+c))["args"])
		if c == "service" {
			assert.Contains(t, args, "--metallb-load-balancer-class=metallb.io/lb")
		} else {
			assert.NotContains(t, args, "--metallb-load-balancer-class", c)
		}
	}
}

// TestGatewayImplementationNamespaces: every controller records Events
// about Services, so each gets the list.
func TestGatewayImplementationNamespaces(t *testing.T) {
	r := render(t, `gatewayImplementationNamespaces: [envoy-gateway-system, gw]`)
	for _, c := range controllers {
		assert.Contains(t, container(t, must(t, r, "Deployment", "metallb-iad-"+c))["args"], "--gateway-implementation-namespaces=envoy-gateway-system,gw", c)
		assert.NotContains(t, fmt.Sprint(container(t, must(t, render(t, ""), "Deployment", "metallb-iad-"+c))["args"]), "--gateway-implementation-namespaces", c)
	}
}

func TestParkingPool(t *testing.T) {
	tests := []struct {
		name, values, wantArg, wantNS string
		wantAddresses                 []any
	}{
		{"default", "", "--parking-pool=metallb-iad-parking", releaseNS, []any{"240.0.0.0/16", "100::/112"}},
		{"own name, ranges and placeholder namespace",
			"placeholderNamespace: iad-holds\nparking:\n  enabled: true\n  poolName: park\n  addresses: [198.18.0.0/24]",
			"--parking-pool=park", "iad-holds", []any{"198.18.0.0/24"}},
		{"disabled", "parking:\n  enabled: false\n  poolName: park\n  addresses: [198.18.0.0/24]", "--parking-pool=", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, tt.values)
			for _, c := range controllers {
				args := container(t, must(t, r, "Deployment", "metallb-iad-"+c))["args"]
				if c == "service" || c == "ipaddress" {
					assert.Contains(t, args, tt.wantArg, c)
				} else {
					assert.NotContains(t, fmt.Sprint(args), "--parking-pool", c)
				}
			}
			pools := r.Find("IPAddressPool")
			if tt.wantAddresses == nil {
				assert.Empty(t, pools)
				return
			}
			require.Len(t, pools, 1)
			spec := pools[0].Object["spec"].(map[string]any)
			assert.Equal(t, strings.TrimPrefix(tt.wantArg, "--parking-pool="), pools[0].GetName())
			assert.Equal(t, tt.wantAddresses, spec["addresses"])
			assert.Equal(t, false, spec["autoAssign"])
			assert.Equal(t, true, spec["avoidBuggyIPs"], "no .0 or .255 address shown in a placeholder's status")
			assert.Equal(t, map[string]any{
				"namespaces":       []any{tt.wantNS},
				"serviceSelectors": []any{map[string]any{"matchLabels": map[string]any{marks.LabelPlaceholder: names.PlaceholderHold}}},
			}, spec["serviceAllocation"])
		})
	}
}

func TestPlaceholderNamespace(t *testing.T) {
	tests := []struct {
		name      string
		values    string
		wantNS    string
		rendersNS bool
	}{
		{"default is the release namespace", "", releaseNS, false},
		{"the release namespace named explicitly", "placeholderNamespace: " + releaseNS, releaseNS, false},
		{"a namespace of its own", "placeholderNamespace: iad-holds", "iad-holds", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, tt.values)
			for _, c := range controllers {
				ct := container(t, must(t, r, "Deployment", "metallb-iad-"+c))
				assert.Contains(t, ct["args"], "--placeholder-namespace="+tt.wantNS, c)
			}
			nss := r.Find("Namespace")
			if !tt.rendersNS {
				assert.Empty(t, nss)
				return
			}
			require.Len(t, nss, 1)
			assert.Equal(t, tt.wantNS, nss[0].GetName())
			assert.Equal(t, "restricted", nss[0].GetLabels()["pod-security.kubernetes.io/enforce"])
		})
	}
}

func TestReleaseNaming(t *testing.T) {
	tests := []struct {
		name   string
		rel    Release
		values string
		prefix string
	}{
		{"release named like the chart", Release{Name: "metallb-iad", Namespace: "a"}, "", "metallb-iad"},
		{"other release name", Release{Name: "edge", Namespace: "a"}, "", "edge-metallb-iad"},
		{"release name containing the chart name", Release{Name: "edge-metallb-iad", Namespace: "a"}, "", "edge-metallb-iad"},
		{"fullnameOverride", Release{Name: "edge", Namespace: "a"}, "fullnameOverride: iad", "iad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Render(tt.rel, tt.values+"\nadmissionPolicy: {enabled: true}")
			require.NoError(t, err)
			for _, c := range controllers {
				name := tt.prefix + "-" + c
				must(t, r, "ServiceAccount", name)
				must(t, r, "ClusterRole", name)
				assert.Equal(t, name, podSpec(t, must(t, r, "Deployment", name))["serviceAccountName"])
				// The lease is the binary's, whatever the release is called.
				role := must(t, r, "Role", name+"-leader-election")
				assert.Contains(t, fmt.Sprint(role.Object["rules"]), "[metallb-iad-"+c+"]")
			}
			vap := must(t, r, "ValidatingAdmissionPolicy", tt.prefix+"-reserved-service-fields")
			assert.Contains(t, fmt.Sprint(vap.Object["spec"]), `"system:serviceaccount:a:`+tt.prefix+`-service"`)
		})
	}
}

func TestServiceMonitor(t *testing.T) {
	r := render(t, `
metrics: {serviceMonitor: {enabled: true, interval: 30s, labels: {release: prom}}}
controllers: {ipaddress: {metricsBindAddress: "0"}, service: {metricsBindAddress: ":9443"}}
`)
	assert.ElementsMatch(t, []string{"metallb-iad-class-metrics", "metallb-iad-claim-metrics", "metallb-iad-service-metrics"}, names4(r, "Service"))
	assert.ElementsMatch(t, names4(r, "Service"), names4(r, "ServiceMonitor"))

	svc := must(t, r, "Service", "metallb-iad-service-metrics")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	assert.Equal(t, []any{map[string]any{"name": "metrics", "port": int64(9443), "targetPort": "metrics", "protocol": "TCP"}}, ports)
	sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	assert.Equal(t, "service", sel["app.kubernetes.io/component"])

	sm := must(t, r, "ServiceMonitor", "metallb-iad-service-metrics")
	assert.Equal(t, "prom", sm.GetLabels()["release"])
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	// Secure metrics by default: HTTPS, with the chart's scraper's token.
	assert.Equal(t, []any{endpoint(map[string]any{"port": "metrics", "path": "/metrics", "interval": "30s"}, secureScrape)}, eps)
	checkScraper(t, r)

	// Plain HTTP metrics: no token, and no scraper to take it from.
	r = render(t, `metrics: {secure: false, serviceMonitor: {enabled: true}}`)
	eps, _, _ = unstructured.NestedSlice(must(t, r, "ServiceMonitor", "metallb-iad-claim-metrics").Object, "spec", "endpoints")
	assert.Equal(t, []any{map[string]any{"port": "metrics", "path": "/metrics", "scheme": "http"}}, eps)
	assertNoScraper(t, r)

	// The Services alone: a scraper of the user's reads them.
	r = render(t, `metrics: {service: {enabled: true}}`)
	assert.Len(t, r.Find("Service"), 4)
	assert.Empty(t, r.Find("ServiceMonitor"))
	assertNoScraper(t, r)
	must(t, r, "ClusterRole", "metallb-iad-metrics-reader")
}

func TestPodDisruptionBudget(t *testing.T) {
	// Single replicas get no budget: it would block every drain.
	r := render(t, `podDisruptionBudget: {enabled: true}`)
	assert.Empty(t, r.Find("PodDisruptionBudget"))

	r = render(t, `
podDisruptionBudget: {enabled: true}
controllers: {claim: {replicas: 2}, service: {replicas: 3}}
`)
	assert.ElementsMatch(t, []string{"metallb-iad-claim", "metallb-iad-service"}, names4(r, "PodDisruptionBudget"))
	pdb := must(t, r, "PodDisruptionBudget", "metallb-iad-claim")
	spec, _, _ := unstructured.NestedMap(pdb.Object, "spec")
	assert.Equal(t, map[string]any{
		"minAvailable": int64(1),
		"selector": map[string]any{"matchLabels": map[string]any{
			"app.kubernetes.io/name": "metallb-iad", "app.kubernetes.io/instance": "metallb-iad", "app.kubernetes.io/component": "claim",
		}},
	}, spec)

	r = render(t, `
podDisruptionBudget: {enabled: true, maxUnavailable: "50%"}
controllers: {claim: {replicas: 2}}
`)
	spec, _, _ = unstructured.NestedMap(must(t, r, "PodDisruptionBudget", "metallb-iad-claim").Object, "spec")
	assert.Equal(t, "50%", spec["maxUnavailable"])
	assert.NotContains(t, spec, "minAvailable")

	r = render(t, `podDisruptionBudget: {enabled: false}
controllers: {claim: {replicas: 2}}`)
	assert.Empty(t, r.Find("PodDisruptionBudget"))
}

// schemaCase is values the chart's schema accepts (wantErr empty) or
// refuses with an error naming wantErr.
type schemaCase struct {
	name    string
	values  string
	wantErr string
}

// checkSchema renders each case as `helm install` would validate it.
func checkSchema(t *testing.T, tests []schemaCase) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(Release{}, tt.values)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "values don't meet the specifications of the schema")
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestSchema(t *testing.T) {
	tests := []schemaCase{
		{"defaults", "", ""},
		{"a full valid set", `
image: {repository: r.example/iad, tag: v1}
placeholderNamespace: iad-holds
controllers: {claim: {replicas: 0, metricsBindAddress: "127.0.0.1:8080"}}
admissionPolicy:
  enabled: true
  namespaceSelector: {matchExpressions: [{key: tenant, operator: Exists}]}
  allowedUsernames: [alice]
  validationActions: [Warn, Audit]
podDisruptionBudget: {enabled: true, minAvailable: "50%"}
`, ""},
		{"misspelt per-controller key", `controllers: {claim: {replica: 2}}`, "replica"},
		{"unknown controller", `controllers: {claims: {replicas: 2}}`, "claims"},
		{"unknown top-level key", `installCRD: true`, "installCRD"},
		{"misspelt image key", `image: {tags: v1}`, "tags"},
		{"misspelt admission key", `admissionPolicy: {enable: true}`, "enable"},
		{"misspelt toleration key", `controllers: {class: {tolerations: [{keys: a}]}}`, "keys"},
		{"misspelt resources key", `controllers: {class: {resources: {request: {cpu: 1m}}}}`, "request"},
		{"replicas of the wrong type", `controllers: {claim: {replicas: two}}`, "replicas"},
		{"negative replicas", `controllers: {claim: {replicas: -1}}`, "replicas"},
		{"leaderElect of the wrong type", `controllers: {service: {leaderElect: "yes"}}`, "leaderElect"},
		{"extraArgs not a list", `controllers: {service: {extraArgs: "--zap-devel"}}`, "extraArgs"},
		{"installCRDs of the wrong type", `installCRDs: "true"`, "installCRDs"},
		{"metrics address without a port", `controllers: {class: {metricsBindAddress: "8080"}}`, "metricsBindAddress"},
		{"invalid namespace name", `placeholderNamespace: Holds_NS`, "placeholderNamespace"},
		{"empty MetalLB namespace", `metallbNamespace: ""`, "metallbNamespace"},
		{"unknown pull policy", `imagePullPolicy: Sometimes`, "imagePullPolicy"},
		{"unknown validation action", `admissionPolicy: {validationActions: [Block]}`, "validationActions"},
		{"Deny with Warn", `admissionPolicy: {validationActions: [Deny, Warn]}`, "validationActions"},
		{"no validation action", `admissionPolicy: {validationActions: []}`, "validationActions"},
	}
	checkSchema(t, tests)
}

// reservedAnnotations are the Service annotations the admission policy guards.
var reservedAnnotations = []string{
	marks.KeyPin,
	marks.KeyPool,
	marks.KeySharing,
	"metallb.universe.tf/loadBalancerIPs",
	"metallb.universe.tf/address-pool",
	"metallb.universe.tf/allow-shared-ip",
	marks.KeyPinnedBy,
	marks.KeySharedBy,
}

func TestAdmissionPolicyRender(t *testing.T) {
	r := render(t, `
admissionPolicy:
  enabled: true
  namespaceSelector: {matchLabels: {tenant: "yes"}}
  allowedUsernames: [alice]
  allowedGroups: [ops]
  validationActions: [Warn, Audit]
`)
	vap := must(t, r, "ValidatingAdmissionPolicy", "metallb-iad-reserved-service-fields")
	spec := vap.Object["spec"].(map[string]any)
	assert.Equal(t, "Fail", spec["failurePolicy"])
	rules, _, _ := unstructured.NestedSlice(spec, "matchConstraints", "resourceRules")
	assert.Equal(t, []any{map[string]any{
		"apiGroups": []any{""}, "apiVersions": []any{"v1"},
		"operations": []any{"CREATE", "UPDATE"}, "resources": []any{"services"},
	}}, rules)

	conds := fmt.Sprint(spec["matchConditions"])
	for _, c := range []string{"service", "claim", "ipaddress"} {
		assert.Contains(t, conds, `"system:serviceaccount:`+releaseNS+`:metallb-iad-`+c+`"`)
	}
	assert.NotContains(t, conds, "metallb-iad-class", "the class controller never writes Services")
	assert.Contains(t, conds, `"alice"`)
	assert.Contains(t, conds, `["ops"]`)

	validations := spec["validations"].([]any)
	require.Len(t, validations, len(reservedAnnotations)+2)
	for i, key := range reservedAnnotations {
		v := validations[i].(map[string]any)
		assert.Contains(t, v["expression"], `"`+key+`"`)
		assert.Contains(t, v["message"], "annotation "+key+" is reserved")
		assert.NotContains(t, v["message"], "\n")
	}
	grant := validations[len(reservedAnnotations)].(map[string]any)
	assert.Contains(t, grant["expression"], `"`+marks.LabelGrant+`"`)
	assert.Contains(t, grant["message"], "label "+marks.LabelGrant+" is reserved")
	last := validations[len(reservedAnnotations)+1].(map[string]any)
	assert.Contains(t, last["expression"], "object.spec.loadBalancerIP")
	assert.Contains(t, last["message"], "spec.loadBalancerIP is reserved")

	b := must(t, r, "ValidatingAdmissionPolicyBinding", "metallb-iad-reserved-service-fields")
	bspec := b.Object["spec"].(map[string]any)
	assert.Equal(t, "metallb-iad-reserved-service-fields", bspec["policyName"])
	assert.Equal(t, []any{"Warn", "Audit"}, bspec["validationActions"])
	sel, _, _ := unstructured.NestedStringMap(bspec, "matchResources", "namespaceSelector", "matchLabels")
	assert.Equal(t, map[string]string{"tenant": "yes"}, sel)

	// Defaults: Deny, every namespace, the two admin groups.
	r = render(t, `admissionPolicy: {enabled: true}`)
	b = must(t, r, "ValidatingAdmissionPolicyBinding", "metallb-iad-reserved-service-fields")
	actions, _, _ := unstructured.NestedStringSlice(b.Object, "spec", "validationActions")
	assert.Equal(t, []string{"Deny"}, actions)
	nsSel, _, _ := unstructured.NestedMap(b.Object, "spec", "matchResources", "namespaceSelector")
	assert.Empty(t, nsSel)
	vap = must(t, r, "ValidatingAdmissionPolicy", "metallb-iad-reserved-service-fields")
	assert.Contains(t, fmt.Sprint(vap.Object["spec"]), `["system:masters","kubeadm:cluster-admins"]`)
}

// TestAdmissionPolicyDefault: on by default whatever renders the chart (a
// cluster, or `helm template` with helm's built-in capabilities alone),
// off only on request, and a render against a cluster too old for it fails
// and says why rather than leaving the policy out.
func TestAdmissionPolicyDefault(t *testing.T) {
	for _, tt := range []struct {
		name    string
		rel     Release
		values  string
		want    bool
		wantErr string
	}{
		{"default values", Release{}, "", true, ""},
		{"helm template without a cluster", Release{NoCluster: true}, "", true, ""},
		{"cluster without ValidatingAdmissionPolicy", Release{WithoutAdmissionPolicyAPI: true}, "",
			false, "does not serve ValidatingAdmissionPolicy"},
		{"cluster without ValidatingAdmissionPolicy, turned off", Release{WithoutAdmissionPolicyAPI: true},
			"admissionPolicy: {enabled: false}", false, ""},
		{"turned off", Release{}, "admissionPolicy: {enabled: false}", false, ""},
		{"turned off, helm template", Release{NoCluster: true}, "admissionPolicy: {enabled: false}", false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Render(tt.rel, tt.values)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.ErrorContains(t, err, "admissionPolicy.enabled=false", "the message says how to install without it")
				return
			}
			require.NoError(t, err)
			// One policy for Services, one for Gateways' infrastructure
			// maps, one for the namespaces a class admits claims from,
			// one bounding the driver's own identities.
			for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
				want := 0
				if tt.want {
					want = 4
				}
				assert.Len(t, r.Find(kind), want, kind)
			}
		})
	}
}
