package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/metallb-iad/test/manifests"
)

// What a release ships, as a user gets it: the packaged chart, the image
// tags, the cross-compiled image and the workflows that publish them.

// TestPackagedChart packages the chart as a release does (make
// helm-package VERSION=x.y.z) and checks what `helm install` of that
// package would run: the chart version and appVersion are the release, and
// every Deployment runs exactly the release's image.
func TestPackagedChart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the helm CLI")
	}
	dir := t.TempDir()
	cmd := exec.Command("make", "-s", "helm-package", "VERSION=1.2.3", "PACKAGE_DIR="+dir)
	cmd.Dir = manifests.Root()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	ch, err := loader.Load(filepath.Join(dir, "metallb-iad-1.2.3.tgz"))
	require.NoError(t, err)
	assert.Equal(t, "1.2.3", ch.Metadata.Version)
	assert.Equal(t, "1.2.3", ch.Metadata.AppVersion)

	r, err := RenderChart(ch, Release{}, "")
	require.NoError(t, err)
	deployments := r.Find("Deployment")
	require.Len(t, deployments, 4)
	for _, d := range deployments {
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		require.Len(t, containers, 1, d.GetName())
		assert.Equal(t, "ghcr.io/cozystack/metallb-iad:1.2.3", containers[0].(map[string]any)["image"], d.GetName())
	}

	for _, bad := range []string{"", "v1.2.3", "1.2", "main"} {
		cmd := exec.Command("make", "-s", "helm-package", "VERSION="+bad, "PACKAGE_DIR="+dir)
		cmd.Dir = manifests.Root()
		out, err := cmd.CombinedOutput()
		assert.Error(t, err, "VERSION=%q must be refused", bad)
		assert.Contains(t, string(out), "set VERSION=x.y.z", "VERSION=%q", bad)
	}
}

// TestReleaseTags checks what each push publishes (hack/release-tags.sh,
// which the release workflow runs).
func TestReleaseTags(t *testing.T) {
	const img = "ghcr.io/cozystack/metallb-iad"
	for _, tc := range []struct {
		ref, version, tags, fails string
	}{
		{ref: "refs/tags/v1.2.3", version: "1.2.3", tags: img + ":1.2.3," + img + ":1.2"},
		{ref: "refs/tags/v0.10.0", version: "0.10.0", tags: img + ":0.10.0," + img + ":0.10"},
		{ref: "refs/tags/v1.2.3-rc.1", version: "1.2.3-rc.1", tags: img + ":1.2.3-rc.1"},
		{ref: "refs/heads/main", version: "", tags: img + ":main," + img + ":main-0123456"},
		{ref: "refs/tags/v1.2", fails: "is not vX.Y.Z"},
		{ref: "refs/tags/latest", fails: "publishes nothing"},
		{ref: "refs/heads/feature", fails: "publishes nothing"},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			cmd := exec.Command("bash", filepath.Join(manifests.Root(), "hack", "release-tags.sh"), tc.ref, "0123456789abcdef")
			out, err := cmd.Output()
			if tc.fails != "" {
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit)
				assert.Contains(t, string(exit.Stderr), tc.fails)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "version="+tc.version+"\ntags="+tc.tags+"\n", string(out))
		})
	}
}

// TestDockerfileCrossCompiles: the build stage runs on the builder's own
// platform and compiles for the target one, so an amd64 runner builds the
// arm64 image without an emulator; the final image is distroless nonroot.
func TestDockerfileCrossCompiles(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(manifests.Root(), "Dockerfile"))
	require.NoError(t, err)
	df := string(b)
	assert.Regexp(t, `(?m)^FROM --platform=\$BUILDPLATFORM golang:\S+ AS build$`, df)
	assert.Regexp(t, `(?m)^ARG TARGETARCH$`, df, "TARGETARCH comes from buildx, with no default to fall back on")
	assert.Contains(t, df, "GOARCH=$TARGETARCH")
	assert.Contains(t, df, "CGO_ENABLED=0")
	assert.Regexp(t, `(?m)^FROM gcr.io/distroless/static:nonroot@sha256:[0-9a-f]{64}$`, df)
	for _, c := range []string{"class", "claim", "service", "ipaddress"} {
		assert.Contains(t, df, c, "the image builds %s", c)
	}
}

// TestUninstallKeepsReservations: nothing the chart renders that holds a
// reservation is deleted by `helm uninstall`: the CRDs and the placeholder
// namespace carry the keep policy, and the chart renders no sharing key
// (the controllers create it), so a render never changes it.
func TestUninstallKeepsReservations(t *testing.T) {
	r := render(t, "installCRDs: true\nplaceholderNamespace: metallb-iad-holds\n")
	require.Len(t, r.Find("CustomResourceDefinition"), 3)
	for _, crd := range r.Find("CustomResourceDefinition") {
		assert.Equal(t, "keep", crd.GetAnnotations()["helm.sh/resource-policy"], crd.GetName())
	}
	ns := must(t, r, "Namespace", "metallb-iad-holds")
	assert.Equal(t, "keep", ns.GetAnnotations()["helm.sh/resource-policy"])
	assert.Empty(t, r.Find("Secret"), "the chart renders no sharing key")
	assert.Contains(t, r.Notes, "helm uninstall", "NOTES say what uninstalling leaves")
}

// TestRenderIsStable renders the chart twice, as `helm template` in a
// GitOps tool does on every sync, with every optional part on: the two
// renders are identical, so a sync changes nothing in the cluster.
func TestRenderIsStable(t *testing.T) {
	values := "installCRDs: true\nplaceholderNamespace: metallb-iad-holds\npodDisruptionBudget: {enabled: true}\n" +
		"metrics: {serviceMonitor: {enabled: true}}\n"
	first := render(t, values)
	second := render(t, values)
	a, err := yaml.Marshal(first.Objects)
	require.NoError(t, err)
	b, err := yaml.Marshal(second.Objects)
	require.NoError(t, err)
	assert.Equal(t, string(a), string(b))
}

// TestExistingSharingKey: with sharingKey.existingSecret the three
// controllers read that Secret, create none, and may read only it.
func TestExistingSharingKey(t *testing.T) {
	for _, tc := range []struct {
		values, flag, secret, namespace string
		create                          bool
	}{
		{values: "", flag: "metallb-iad-sharing-key", secret: "metallb-iad-sharing-key", namespace: releaseNS, create: true},
		{values: "sharingKey: {existingSecret: my-key}", flag: "my-key", secret: "my-key", namespace: releaseNS, create: false},
		// Another namespace: the Roles that grant it are rendered there.
		{values: "sharingKey: {existingSecret: vault/my-key}", flag: "vault/my-key", secret: "my-key", namespace: "vault", create: false},
	} {
		r := render(t, tc.values)
		for _, c := range []string{"claim", "service", "ipaddress"} {
			args := container(t, must(t, r, "Deployment", "metallb-iad-"+c))["args"]
			assert.Contains(t, args, "--sharing-key-secret="+tc.flag, c)
			assert.Contains(t, args, "--sharing-key-create="+map[bool]string{true: "true", false: "false"}[tc.create], c)

			role := must(t, r, "Role", "metallb-iad-"+c+"-sharing-key")
			assert.Equal(t, tc.namespace, role.GetNamespace(), c)
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			var verbs []string
			for _, rule := range rules {
				m := rule.(map[string]any)
				if names, ok := m["resourceNames"]; ok {
					assert.Equal(t, []any{tc.secret}, names, c)
				}
				for _, v := range m["verbs"].([]any) {
					verbs = append(verbs, v.(string))
				}
			}
			// The controllers watch the one Secret they read.
			if tc.create {
				assert.Equal(t, []string{"create", "get", "list", "watch"}, verbs, c)
			} else {
				assert.Equal(t, []string{"get", "list", "watch"}, verbs, c)
			}
			binding := must(t, r, "RoleBinding", "metallb-iad-"+c+"-sharing-key")
			assert.Equal(t, tc.namespace, binding.GetNamespace(), c)
			subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
			assert.Equal(t, "metallb-iad-"+c, subjects[0].(map[string]any)["name"])
			assert.Equal(t, releaseNS, subjects[0].(map[string]any)["namespace"], "the ServiceAccount stays in the release namespace")
		}
		args := container(t, must(t, r, "Deployment", "metallb-iad-class"))["args"]
		assert.NotContains(t, strings.Join(toStrings(args), " "), "sharing-key", "the class controller derives no keys")
	}
	for _, bad := range []string{"7", `"a/b/c"`, `"/key"`, `"ns/"`, `"Key"`} {
		_, err := Render(Release{}, "sharingKey: {existingSecret: "+bad+"}")
		assert.Error(t, err, "the schema refuses %s", bad)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// workflow reads one of .github/workflows.
func workflow(t *testing.T, name string) map[string]any {
	b, err := os.ReadFile(filepath.Join(manifests.Root(), ".github", "workflows", name))
	require.NoError(t, err)
	w := map[string]any{}
	require.NoError(t, yaml.Unmarshal(b, &w))
	return w
}

// TestWorkflows lints the workflows with actionlint at the Makefile's
// version, and checks what they promise: a release is published only after
// make test passed; the kind e2e runs the oldest and newest MetalLB tested,
// the real core at a pinned commit, the node-only features, with the
// Makefile's kind and helm, and keeps the logs of a failed run.
func TestWorkflows(t *testing.T) {
	if testing.Short() {
		t.Skip("builds actionlint")
	}
	cmd := exec.Command("make", "-s", "lint-workflows")
	cmd.Dir = manifests.Root()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "actionlint:\n%s", out)

	rel := workflow(t, "release.yaml")
	jobs := rel["jobs"].(map[string]any)
	assert.Equal(t, "./.github/workflows/test.yaml", jobs["test"].(map[string]any)["uses"], "the release runs make test first")
	assert.Equal(t, "./.github/workflows/e2e-kind.yaml", jobs["e2e"].(map[string]any)["uses"], "and the kind e2e with the real core")
	assert.ElementsMatch(t, []any{"test", "e2e"}, jobs["image-and-chart"].(map[string]any)["needs"], "and publishes only after both passed")
	tb, err := os.ReadFile(filepath.Join(manifests.Root(), ".github", "workflows", "test.yaml"))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^  workflow_call:$`, string(tb), "release.yaml can call it")

	kind := workflow(t, "e2e-kind.yaml")
	job := kind["jobs"].(map[string]any)["e2e"].(map[string]any)
	matrix := job["strategy"].(map[string]any)["matrix"].(map[string]any)
	assert.ElementsMatch(t, []any{"v0.15.2", "v0.16.1"}, matrix["metallb"], "the oldest and newest MetalLB tested")
	b, err := os.ReadFile(filepath.Join(manifests.Root(), ".github", "workflows", "e2e-kind.yaml"))
	require.NoError(t, err)
	text := string(b)
	assert.Contains(t, text, "repository: lllamnyp/address-controller")
	assert.Regexp(t, regexp.MustCompile(`ref: [0-9a-f]{40}`), text, "the core at a pinned commit")
	assert.Contains(t, text, "E2E_CORE_SRC")
	assert.Contains(t, text, "make e2e-tools", "kind and helm at the Makefile's versions")
	assert.Contains(t, text, "make test-kind")
	assert.Contains(t, text, "actions/upload-artifact")
	assert.Contains(t, text, "failure()")
}

// usesLine is a step's action reference: a local one, or an action pinned
// by its full commit with the version in a comment.
var (
	usesLine   = regexp.MustCompile(`(?m)^\s*-?\s*uses:\s*(\S+)(.*)$`)
	pinnedUses = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$`)
	versionTag = regexp.MustCompile(`^\s*# v\d+(\.\d+)*\s*$`)
	digestFrom = regexp.MustCompile(`@sha256:[0-9a-f]{64}(\s|$)`)
)

// TestSupplyChain reads the workflows, the Dockerfile and the Dependabot
// configuration for what a platform's admission policies check of a
// release: every action pinned by commit (its version in a comment), base
// images by digest, the image's OCI labels, an SBOM and a provenance
// attestation, keyless cosign signatures of the image and the chart, kind's
// node images by digest, and Dependabot keeping all of them current.
func TestSupplyChain(t *testing.T) {
	dir := filepath.Join(manifests.Root(), ".github", "workflows")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		for _, m := range usesLine.FindAllStringSubmatch(string(b), -1) {
			ref, comment := m[1], m[2]
			if strings.HasPrefix(ref, "./") {
				continue
			}
			assert.Regexp(t, pinnedUses, ref, "%s: %s is pinned by its full commit", e.Name(), ref)
			assert.Regexp(t, versionTag, comment, "%s: %s says its version in a comment", e.Name(), ref)
		}
	}

	rb, err := os.ReadFile(filepath.Join(dir, "release.yaml"))
	require.NoError(t, err)
	release := string(rb)
	job := workflow(t, "release.yaml")["jobs"].(map[string]any)["image-and-chart"].(map[string]any)
	assert.Equal(t, "write", job["permissions"].(map[string]any)["id-token"], "keyless signing needs the OIDC token")
	assert.Contains(t, release, "uses: sigstore/cosign-installer@")
	assert.Contains(t, release, `cosign sign --yes "ghcr.io/cozystack/metallb-iad@${DIGEST}"`, "the image is signed by digest")
	assert.Contains(t, release, `cosign sign --yes "ghcr.io/cozystack/charts/metallb-iad@${digest}"`, "the chart is signed by digest")
	assert.Regexp(t, `(?m)^\s+sbom: true$`, release, "an SBOM attestation on the image")
	assert.Regexp(t, `(?m)^\s+provenance: mode=max$`, release, "a provenance attestation on the image")
	assert.Contains(t, release, "REVISION=${{ github.sha }}", "the image's revision label is the commit")

	kb, err := os.ReadFile(filepath.Join(dir, "e2e-kind.yaml"))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^  workflow_call:$`, string(kb), "release.yaml can call the kind e2e")
	kind := workflow(t, "e2e-kind.yaml")["jobs"].(map[string]any)["e2e"].(map[string]any)
	nodes := kind["strategy"].(map[string]any)["matrix"].(map[string]any)["node"].([]any)
	require.NotEmpty(t, nodes)
	for _, n := range nodes {
		assert.Regexp(t, `^kindest/node:v\d+\.\d+\.\d+@sha256:[0-9a-f]{64}$`, n, "kind's node images by digest")
	}

	db, err := os.ReadFile(filepath.Join(manifests.Root(), "Dockerfile"))
	require.NoError(t, err)
	froms := 0
	for _, l := range strings.Split(string(db), "\n") {
		if strings.HasPrefix(l, "FROM ") {
			froms++
			assert.Regexp(t, digestFrom, l, "base image pinned by digest: %s", l)
		}
	}
	assert.Equal(t, 2, froms)
	for _, label := range []string{"source", "revision", "version", "licenses"} {
		assert.Contains(t, string(db), "org.opencontainers.image."+label+"=", "OCI label %s", label)
	}

	dep := map[string]any{}
	b, err := os.ReadFile(filepath.Join(manifests.Root(), ".github", "dependabot.yml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &dep))
	var ecosystems []any
	for _, u := range dep["updates"].([]any) {
		ecosystems = append(ecosystems, u.(map[string]any)["package-ecosystem"])
	}
	assert.ElementsMatch(t, []any{"gomod", "github-actions", "docker"}, ecosystems, "Dependabot keeps modules, actions and base images current")
}
