package chart

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/metallb-iad/test/manifests"
)

// What a release ships, as a user gets it: the packaged chart, the image
// tags, the cross-compiled image and the workflows that publish them.

// TestPackagedChart packages the chart as the release workflow does (make
// helm-package VERSION=x.y.z IMAGE_DIGEST=sha256:...) and checks what `helm
// install` of that package would run: the chart version and appVersion are
// the release, the packaged values carry the digest of the image the release
// pushed and signed, and every Deployment runs exactly that image, by
// digest. Packaged without a digest (by hand), the chart runs the release's
// tag. Malformed versions and digests are refused.
func TestPackagedChart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the helm CLI")
	}
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	pkg := func(t *testing.T, args ...string) *chart.Chart {
		dir := t.TempDir()
		out, err := makeIn(append([]string{"-s", "helm-package", "PACKAGE_DIR=" + dir}, args...)...)
		require.NoError(t, err, "%s", out)
		ch, err := loader.Load(filepath.Join(dir, "metallb-iad-1.2.3.tgz"))
		require.NoError(t, err)
		assert.Equal(t, "1.2.3", ch.Metadata.Version)
		assert.Equal(t, "1.2.3", ch.Metadata.AppVersion)
		return ch
	}
	images := func(t *testing.T, r *Rendered) []string {
		deployments := r.Find("Deployment")
		require.Len(t, deployments, 4)
		var out []string
		for _, d := range deployments {
			containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			require.Len(t, containers, 1, d.GetName())
			out = append(out, containers[0].(map[string]any)["image"].(string))
		}
		return out
	}
	packagedValues := func(t *testing.T, ch *chart.Chart) string {
		for _, f := range ch.Raw {
			if f.Name == "values.yaml" {
				return string(f.Data)
			}
		}
		t.Fatal("the package holds no values.yaml")
		return ""
	}
	source, err := os.ReadFile(filepath.Join(Dir(), "values.yaml"))
	require.NoError(t, err)

	t.Run("as the release workflow packages it", func(t *testing.T) {
		ch := pkg(t, "VERSION=1.2.3", "IMAGE_DIGEST="+digest)
		img, _ := ch.Values["image"].(map[string]any)
		require.Equal(t, digest, img["digest"], "the packaged values.yaml pins the release's image: make helm-package stamped no digest")
		// The digest line is the one change to the chart's values.yaml.
		stamped := strings.Replace(string(source), "\n  digest: \"\"\n", "\n  digest: \""+digest+"\"\n", 1)
		assert.Equal(t, stamped, packagedValues(t, ch))

		r, err := RenderChart(ch, Release{}, "")
		require.NoError(t, err)
		for _, image := range images(t, r) {
			assert.Equal(t, "ghcr.io/cozystack/metallb-iad@"+digest, image, "the packaged chart runs the signed image by digest")
		}
	})
	t.Run("by hand, without a digest", func(t *testing.T) {
		ch := pkg(t, "VERSION=1.2.3")
		assert.Equal(t, string(source), packagedValues(t, ch))
		r, err := RenderChart(ch, Release{}, "")
		require.NoError(t, err)
		for _, image := range images(t, r) {
			assert.Equal(t, "ghcr.io/cozystack/metallb-iad:1.2.3", image)
		}
	})

	dir := t.TempDir()
	for _, bad := range []string{"", "v1.2.3", "1.2", "main", "01.2.3", "1.2.3+build.1", "1.2.3-rc..1"} {
		out, err := makeIn("-s", "helm-package", "VERSION="+bad, "PACKAGE_DIR="+dir)
		assert.Error(t, err, "VERSION=%q must be refused", bad)
		assert.Contains(t, string(out), "set VERSION=x.y.z", "VERSION=%q", bad)
	}
	for _, bad := range []string{"sha256:abc", "sha512:" + strings.Repeat("0", 128), strings.ToUpper(digest), digest[len("sha256:"):]} {
		out, err := makeIn("-s", "helm-package", "VERSION=1.2.3", "IMAGE_DIGEST="+bad, "PACKAGE_DIR="+dir)
		assert.Error(t, err, "IMAGE_DIGEST=%q must be refused", bad)
		assert.Contains(t, string(out), "IMAGE_DIGEST is sha256:", "IMAGE_DIGEST=%q", bad)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing refused was packaged")
}

// makeIn runs make in the repository's root, with none of the versions of
// hack/versions.env overridden by the environment or by the variables of a
// make that runs the tests.
func makeIn(args ...string) ([]byte, error) { return makeEnv(nil, args...) }

// makeEnv is makeIn with env (KEY=value) added to the environment.
func makeEnv(env []string, args ...string) ([]byte, error) {
	cmd := exec.Command("make", args...)
	cmd.Dir = manifests.Root()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := versionKeys[k]; !ok && k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKEOVERRIDES" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd.CombinedOutput()
}

// TestReleaseTags checks what each push publishes (hack/release-tags.sh,
// which the release workflow runs first) and that a tag is a release only
// when it is semver without build metadata; `make helm-package` takes the
// same versions and refuses the same others.
func TestReleaseTags(t *testing.T) {
	const img = "ghcr.io/cozystack/metallb-iad"
	for _, tc := range []struct {
		ref, version, tags, fails string
	}{
		{ref: "refs/tags/v1.2.3", version: "1.2.3", tags: img + ":1.2.3," + img + ":1.2"},
		{ref: "refs/tags/v0.10.0", version: "0.10.0", tags: img + ":0.10.0," + img + ":0.10"},
		{ref: "refs/tags/v1.2.3-rc.1", version: "1.2.3-rc.1", tags: img + ":1.2.3-rc.1"},
		{ref: "refs/tags/v1.2.3-0a.x-y", version: "1.2.3-0a.x-y", tags: img + ":1.2.3-0a.x-y"},
		{ref: "refs/heads/main", version: "", tags: img + ":main," + img + ":main-0123456"},
		{ref: "refs/tags/v1.2", fails: "is not vX.Y.Z"},
		{ref: "refs/tags/v01.2.3", fails: "is not vX.Y.Z"},
		{ref: "refs/tags/v1.02.3", fails: "is not vX.Y.Z"},
		{ref: "refs/tags/v1.2.3-", fails: "is not vX.Y.Z"},
		{ref: "refs/tags/v1.2.3-rc..1", fails: "is not vX.Y.Z"},
		{ref: "refs/tags/v1.2.3-01", fails: "is not vX.Y.Z"},
		{ref: "refs/tags/v1.2.3+build.1", fails: "is not vX.Y.Z"},
		{ref: "refs/tags/vfoo", fails: "is not vX.Y.Z"},
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
			} else {
				require.NoError(t, err)
				assert.Equal(t, "version="+tc.version+"\ntags="+tc.tags+"\n", string(out))
			}
			v, isTag := strings.CutPrefix(tc.ref, "refs/tags/v")
			if !isTag || testing.Short() {
				return
			}
			// A well-formed IMAGE_DIGEST check comes after the version's: a
			// version make takes fails on the digest instead, packaging nothing.
			out, _ = makeIn("-s", "helm-package", "VERSION="+v, "IMAGE_DIGEST=bad", "PACKAGE_DIR="+t.TempDir())
			if tc.fails != "" {
				assert.Contains(t, string(out), "set VERSION=x.y.z", "make helm-package refuses %q as the tag check does", v)
			} else {
				assert.Contains(t, string(out), "IMAGE_DIGEST is sha256:", "make helm-package takes %q as the tag check does", v)
			}
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

// TestDockerfileGoIsGoMod: the image is built with exactly the Go that CI
// uses, go.mod's toolchain line (setup-go reads it from go-version-file):
// the Dockerfile's GO_VERSION is the same release and GOTOOLCHAIN makes the
// go command run it whatever patch release the base image holds; the base
// image's tag is the same minor release line.
func TestDockerfileGoIsGoMod(t *testing.T) {
	gomod := readRepo(t, "go.mod")
	m := regexp.MustCompile(`(?m)^toolchain go(\d+\.\d+)\.(\d+)$`).FindStringSubmatch(gomod)
	require.NotNil(t, m, "go.mod names the Go release in its toolchain line")
	goVersion, minor := m[1]+"."+m[2], m[1]
	// The go line stays at or below the toolchain: a machine whose Go is the
	// toolchain's builds without downloading another.
	g := regexp.MustCompile(`(?m)^go (\d+\.\d+)(\.\d+)?$`).FindStringSubmatch(gomod)
	require.NotNil(t, g)
	assert.Equal(t, minor, g[1], "go.mod's go line and toolchain line are one minor release")

	df := readRepo(t, "Dockerfile")
	assert.Regexp(t, `(?m)^ARG GO_VERSION=`+regexp.QuoteMeta(goVersion)+`$`, df, "the Dockerfile's Go is go.mod's toolchain, go%s", goVersion)
	assert.Regexp(t, `(?m)^ENV GOTOOLCHAIN=go\$\{GO_VERSION\}$`, df, "and the go command runs exactly that release")
	assert.Regexp(t, `(?m)^FROM --platform=\$BUILDPLATFORM golang:`+regexp.QuoteMeta(minor)+`@sha256:[0-9a-f]{64} AS build$`, df, "the base image is the same Go line")
	assert.Less(t, strings.Index(df, "FROM --platform=$BUILDPLATFORM golang:"), strings.Index(df, "ARG GO_VERSION="), "GO_VERSION is the build stage's")
	assert.Less(t, strings.Index(df, "ENV GOTOOLCHAIN="), strings.Index(df, "RUN go mod download"), "before any go command runs")

	for name, text := range workflowTexts(t) {
		assert.NotRegexp(t, `(?m)^\s*go-version:`, text, "%s: Go comes from go.mod, not a version of its own", name)
		for _, w := range regexp.MustCompile(`(?ms)uses: actions/setup-go@.*?\n\s+with:\n\s+go-version-file: (\S+)`).FindAllStringSubmatch(text, -1) {
			assert.Equal(t, "go.mod", w[1], "%s: setup-go reads go.mod", name)
		}
		assert.Equal(t, strings.Count(text, "uses: actions/setup-go@"), len(regexp.MustCompile(`go-version-file: go.mod`).FindAllString(text, -1)), "%s: every setup-go reads go.mod", name)
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
		"metrics: {serviceMonitor: {enabled: true}}\n" +
		"networkPolicy: {enabled: true}\ncommonLabels: {team: network, tier: control}\n" +
		"defaults: {serviceAccount: {annotations: {b: two, a: one}}}\n" +
		"extraObjects: [{apiVersion: v1, kind: ConfigMap, metadata: {name: x}, data: {b: two, a: one}}]\n"
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

// workflowTexts reads every file of .github/workflows, by name.
func workflowTexts(t *testing.T) map[string]string {
	dir := filepath.Join(manifests.Root(), ".github", "workflows")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range entries {
		out[e.Name()] = readRepo(t, filepath.Join(".github", "workflows", e.Name()))
	}
	require.NotEmpty(t, out)
	return out
}

// readRepo reads a file of the repository.
func readRepo(t *testing.T, rel string) string {
	b, err := os.ReadFile(filepath.Join(manifests.Root(), rel))
	require.NoError(t, err)
	return string(b)
}

// steps are a job's steps; jobs a workflow's jobs.
func jobs(w map[string]any) map[string]any { return w["jobs"].(map[string]any) }

func steps(job any) []map[string]any {
	var out []map[string]any
	s, _ := job.(map[string]any)["steps"].([]any)
	for _, x := range s {
		out = append(out, x.(map[string]any))
	}
	return out
}

// step is the step of job whose id or name is key.
func step(t *testing.T, job any, key string) map[string]any {
	for _, s := range steps(job) {
		if s["id"] == key || s["name"] == key {
			return s
		}
	}
	t.Fatalf("no step %q", key)
	return nil
}

// TestWorkflows lints the workflows with actionlint at hack/versions.env's
// version, and checks what they promise: a release is published only after
// its tag was checked, make test passed and the kind e2e passed; the chart
// it publishes pins the image it pushed and signed, by the digest cosign
// signed; and it ends by pulling both as an anonymous user. The kind e2e
// runs hack/versions.env's matrix (the oldest and newest MetalLB tested,
// node images by digest) and the real core at its pinned commit, with the
// node-only features and the Makefile's kind and helm, and keeps the logs
// of a failed run.
func TestWorkflows(t *testing.T) {
	if testing.Short() {
		t.Skip("builds actionlint")
	}
	out, err := makeIn("-s", "lint-workflows")
	require.NoError(t, err, "actionlint:\n%s", out)
	v := readVersions(t)

	rel := workflow(t, "release.yaml")
	j := jobs(rel)
	assert.Equal(t, "./.github/workflows/test.yaml", j["test"].(map[string]any)["uses"], "the release runs make test first")
	assert.Equal(t, "./.github/workflows/e2e-kind.yaml", j["e2e"].(map[string]any)["uses"], "and the kind e2e with the real core")
	assert.ElementsMatch(t, []any{"ref", "test", "e2e"}, j["image-and-chart"].(map[string]any)["needs"], "and publishes only after all passed")
	assert.Regexp(t, `(?m)^  workflow_call:$`, readRepo(t, ".github/workflows/test.yaml"), "release.yaml can call it")

	// The digest build-push-action output is the one cosign signs and the
	// one the chart's values pin.
	publish := j["image-and-chart"]
	image := step(t, publish, "image")
	assert.True(t, strings.HasPrefix(image["uses"].(string), "docker/build-push-action@"), "the image step builds and pushes")
	const digest = "${{ steps.image.outputs.digest }}"
	sign := step(t, publish, "sign the image")
	assert.Equal(t, digest, sign["env"].(map[string]any)["DIGEST"])
	assert.Contains(t, sign["run"], `cosign sign --yes "ghcr.io/cozystack/metallb-iad@${DIGEST}"`)
	chartStep := step(t, publish, "package, push and sign the chart")
	assert.Equal(t, digest, chartStep["env"].(map[string]any)["DIGEST"], "the chart pins the digest cosign signed")
	assert.Contains(t, chartStep["run"], `make helm-package VERSION="$VERSION" IMAGE_DIGEST="$DIGEST"`, "packaged as TestPackagedChart packages it")
	assert.Contains(t, chartStep["run"], `bin/helm push "bin/metallb-iad-$VERSION.tgz" oci://ghcr.io/cozystack/charts`)

	// Last, both are pulled with no credentials, and a refusal says what to do.
	s := steps(publish)
	anon := s[len(s)-1]
	run := anon["run"].(string)
	assert.Equal(t, digest, anon["env"].(map[string]any)["DIGEST"])
	assert.Regexp(t, `DOCKER_CONFIG="\$anon/docker" docker manifest inspect "\$image"`, run, "the image's manifest, with an empty docker configuration")
	assert.Contains(t, run, `image="ghcr.io/cozystack/metallb-iad@${DIGEST}"`)
	assert.Regexp(t, `HELM_REGISTRY_CONFIG="\$anon/helm/config.json"`, run, "the chart, with no helm registry login")
	assert.Contains(t, run, `bin/helm pull "$chart" --version "$VERSION"`)
	assert.Contains(t, run, "chart=oci://ghcr.io/cozystack/charts/metallb-iad")
	assert.Equal(t, 2, strings.Count(run, "::error title="), "each refusal fails loudly")
	assert.Equal(t, 2, strings.Count(run, "exit 1"))
	for _, pkg := range []string{"package metallb-iad public", "package charts/metallb-iad public"} {
		assert.Contains(t, run, pkg, "the error names the package to make public")
	}
	readme := readRepo(t, "README.md")
	release := readme[strings.Index(readme, "\n## Release\n"):]
	for _, want := range []string{"make the two packages public", "`metallb-iad` (the image)", "`charts/metallb-iad` (the\nchart)", "Change visibility, Public", "re-run the failed job"} {
		assert.Contains(t, release, want, "the README's Release section tells the owner to make both packages public")
	}

	// The kind e2e: its matrix and the core from hack/versions.env.
	kind := workflow(t, "e2e-kind.yaml")
	kj := jobs(kind)
	versions := kj["versions"]
	e2e := kj["e2e"].(map[string]any)
	assert.Equal(t, []any{"versions"}, e2e["needs"])
	matrix := e2e["strategy"].(map[string]any)["matrix"].(map[string]any)
	assert.Equal(t, "${{ fromJSON(needs.versions.outputs.metallb) }}", matrix["metallb"])
	assert.Equal(t, "${{ fromJSON(needs.versions.outputs.node) }}", matrix["node"])
	var core map[string]any
	for _, s := range steps(e2e) {
		if w, ok := s["with"].(map[string]any); ok && w["path"] == ".e2e/address-controller" {
			core = w
		}
	}
	require.NotNil(t, core, "the core is checked out beside the project")
	assert.Equal(t, "${{ needs.versions.outputs.core-repository }}", core["repository"])
	assert.Equal(t, "${{ needs.versions.outputs.core-commit }}", core["ref"], "the core at a pinned commit")
	text := readRepo(t, ".github/workflows/e2e-kind.yaml")
	assert.Contains(t, text, "E2E_CORE_SRC")
	assert.Contains(t, text, "make e2e-tools", "kind and helm at the Makefile's versions")
	assert.Contains(t, text, "make test-kind")
	assert.Contains(t, text, "METALLB_VERSION: ${{ matrix.metallb }}")
	assert.Contains(t, text, "E2E_KIND_IMAGE: ${{ matrix.node }}")
	assert.Contains(t, text, "actions/upload-artifact")
	assert.Contains(t, text, "failure()")

	// The versions step, run as the runner runs it, gives that matrix.
	if _, err := exec.LookPath("jq"); err != nil {
		t.Log("no jq here: the versions step is not run")
		return
	}
	outputs := filepath.Join(t.TempDir(), "outputs")
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step(t, versions, "versions")["run"].(string))
	cmd.Dir = manifests.Root()
	cmd.Env = append(os.Environ(), "GITHUB_OUTPUT="+outputs)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(readFileString(t, outputs)), "\n") {
		k, val, _ := strings.Cut(l, "=")
		got[k] = val
	}
	jsonList := func(s string) string {
		b, err := json.Marshal(strings.Split(s, ","))
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, map[string]string{
		"metallb":         jsonList(v["E2E_METALLB_VERSIONS"]),
		"node":            jsonList(v["E2E_KIND_NODE_IMAGES"]),
		"core-repository": v["CORE_REPOSITORY"],
		"core-commit":     v["CORE_COMMIT"],
	}, got)
	assert.Equal(t, []string{"v0.15.2", "v0.16.1"}, strings.Split(v["E2E_METALLB_VERSIONS"], ","), "the oldest and newest MetalLB tested")
}

func readFileString(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestWorkflowsHygiene: one run per workflow and ref at a time, a release
// never cancelled halfway and no called workflow sharing its caller's group
// (which deadlocks); no checkout leaves the token in the work tree; every
// run step is bash with pipefail, so a failure inside a pipe (into tee, say)
// fails the step; and the release checks its tag first, in a cheap job
// every other job needs, before any test runs.
func TestWorkflowsHygiene(t *testing.T) {
	groups := map[string]string{}
	for name := range workflowTexts(t) {
		w := workflow(t, name)
		c, ok := w["concurrency"].(map[string]any)
		require.True(t, ok, "%s has a concurrency group", name)
		group, _ := c["group"].(string)
		assert.Contains(t, group, "${{ github.ref }}", "%s: one group per ref", name)
		prefix, _, _ := strings.Cut(group, "${{")
		assert.NotEmpty(t, prefix, "%s: the group names the workflow", name)
		if other, dup := groups[prefix]; dup {
			t.Errorf("%s and %s share the concurrency group %q: a called workflow would wait for its caller", name, other, group)
		}
		groups[prefix] = name
		switch name {
		case "release.yaml":
			assert.Equal(t, false, c["cancel-in-progress"], "a release is never cancelled halfway")
		default:
			// A run release.yaml called is a push: only pull requests cancel.
			assert.Contains(t, []any{false, "${{ github.event_name == 'pull_request' }}"}, c["cancel-in-progress"], name)
		}

		shell := ""
		if d, ok := w["defaults"].(map[string]any); ok {
			shell, _ = d["run"].(map[string]any)["shell"].(string)
		}
		for jn, job := range jobs(w) {
			jobShell := shell
			if d, ok := job.(map[string]any)["defaults"].(map[string]any); ok {
				jobShell, _ = d["run"].(map[string]any)["shell"].(string)
			}
			for i, s := range steps(job) {
				where := fmt.Sprintf("%s: job %s, step %d", name, jn, i)
				if uses, _ := s["uses"].(string); strings.HasPrefix(uses, "actions/checkout@") {
					w, _ := s["with"].(map[string]any)
					assert.Equal(t, false, w["persist-credentials"], "%s: actions/checkout with persist-credentials: false", where)
				}
				run, ok := s["run"].(string)
				if !ok {
					continue
				}
				sh := jobShell
				if x, ok := s["shell"].(string); ok {
					sh = x
				}
				// GitHub runs shell: bash as bash -eo pipefail; its default
				// shell has no pipefail.
				if sh != "bash" {
					assert.Regexp(t, `(?m)^\s*set -[a-z]*o pipefail`, run, "%s: bash with pipefail", where)
				}
			}
		}
	}

	rel := workflow(t, "release.yaml")
	j := jobs(rel)
	ref := j["ref"].(map[string]any)
	assert.Nil(t, ref["needs"], "the tag is checked first")
	assert.LessOrEqual(t, ref["timeout-minutes"], float64(5), "in a cheap job")
	assert.Equal(t, "hack/release-tags.sh \"$GITHUB_REF\" \"$GITHUB_SHA\" | tee -a \"$GITHUB_OUTPUT\"", step(t, ref, "release")["run"])
	for _, s := range steps(ref) {
		if run, ok := s["run"].(string); ok {
			assert.NotRegexp(t, `\b(make|go)\b`, run, "nothing is built or tested before the tag is checked")
		}
	}
	for name, job := range j {
		if name == "ref" {
			continue
		}
		needs, _ := job.(map[string]any)["needs"].([]any)
		assert.Contains(t, needs, "ref", "job %s waits for the tag check", name)
	}
	assert.Equal(t, "${{ needs.ref.outputs.tags }}", step(t, j["image-and-chart"], "image")["with"].(map[string]any)["tags"], "the image tags are those the tag check computed")

	var ignored []string
	for _, l := range strings.Split(readRepo(t, ".dockerignore"), "\n") {
		ignored = append(ignored, strings.TrimSpace(l))
	}
	assert.Contains(t, ignored, ".git", "the build context holds no history")
}

// usesLine is a step's action reference: a local one, or an action pinned
// by its full commit with its release in a comment.
var (
	usesLine   = regexp.MustCompile(`(?m)^\s*-?\s*uses:\s*(\S+)(.*)$`)
	pinnedUses = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$`)
	versionTag = regexp.MustCompile(`^\s*# v\d+\.\d+\.\d+\s*$`)
	digestFrom = regexp.MustCompile(`@sha256:[0-9a-f]{64}(\s|$)`)
)

// TestSupplyChain reads the workflows, the Dockerfile and the Dependabot
// configuration for what a platform's admission policies check of a
// release: every action pinned by its full commit, its release in a
// `# vX.Y.Z` comment, the same pin wherever it is used; base images by
// digest; the image's OCI labels, an SBOM and a provenance attestation,
// keyless cosign signatures of the image and the chart; kind's node images
// by digest; and Dependabot keeping all of them current, every Go module of
// the repository included.
func TestSupplyChain(t *testing.T) {
	pins := map[string]string{}
	for name, text := range workflowTexts(t) {
		for _, m := range usesLine.FindAllStringSubmatch(text, -1) {
			ref, comment := m[1], m[2]
			if strings.HasPrefix(ref, "./") {
				continue
			}
			assert.Regexp(t, pinnedUses, ref, "%s: %s is pinned by its full commit", name, ref)
			assert.Regexp(t, versionTag, comment, "%s: %s says its release in a comment, # vX.Y.Z", name, ref)
			action, _, _ := strings.Cut(ref, "@")
			pin := ref + strings.TrimSpace(comment)
			if p, seen := pins[action]; seen {
				assert.Equal(t, p, pin, "%s: %s is pinned as everywhere else", name, action)
			}
			pins[action] = pin
		}
	}

	release := readRepo(t, ".github/workflows/release.yaml")
	job := jobs(workflow(t, "release.yaml"))["image-and-chart"].(map[string]any)
	assert.Equal(t, "write", job["permissions"].(map[string]any)["id-token"], "keyless signing needs the OIDC token")
	assert.Contains(t, release, "uses: sigstore/cosign-installer@")
	assert.Contains(t, release, `cosign sign --yes "ghcr.io/cozystack/metallb-iad@${DIGEST}"`, "the image is signed by digest")
	assert.Contains(t, release, `cosign sign --yes "ghcr.io/cozystack/charts/metallb-iad@${digest}"`, "the chart is signed by digest")
	assert.Regexp(t, `(?m)^\s+sbom: true$`, release, "an SBOM attestation on the image")
	assert.Regexp(t, `(?m)^\s+provenance: mode=max$`, release, "a provenance attestation on the image")
	assert.Contains(t, release, "REVISION=${{ github.sha }}", "the image's revision label is the commit")
	assert.Contains(t, release, "index:org.opencontainers.image.source=https://github.com/cozystack/metallb-iad", "the multi-arch index names its source")

	assert.Regexp(t, `(?m)^  workflow_call:$`, readRepo(t, ".github/workflows/e2e-kind.yaml"), "release.yaml can call the kind e2e")
	nodes := strings.Split(readVersions(t)["E2E_KIND_NODE_IMAGES"], ",")
	require.NotEmpty(t, nodes)
	for _, n := range nodes {
		assert.Regexp(t, `^kindest/node:v\d+\.\d+\.\d+@sha256:[0-9a-f]{64}$`, n, "kind's node images by digest")
	}

	df := readRepo(t, "Dockerfile")
	froms := 0
	for _, l := range strings.Split(df, "\n") {
		if strings.HasPrefix(l, "FROM ") {
			froms++
			assert.Regexp(t, digestFrom, l, "base image pinned by digest: %s", l)
		}
	}
	assert.Equal(t, 2, froms)
	for _, label := range []string{"source", "revision", "version", "licenses"} {
		assert.Contains(t, df, "org.opencontainers.image."+label+"=", "OCI label %s", label)
	}

	dep := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(readRepo(t, ".github/dependabot.yml")), &dep))
	ecosystems := map[string]bool{}
	var gomod []string
	for _, u := range dep["updates"].([]any) {
		u := u.(map[string]any)
		eco := u["package-ecosystem"].(string)
		ecosystems[eco] = true
		var dirs []string
		if d, ok := u["directory"].(string); ok {
			dirs = append(dirs, d)
		}
		ds, _ := u["directories"].([]any)
		for _, d := range ds {
			dirs = append(dirs, d.(string))
		}
		switch eco {
		case "gomod":
			gomod = append(gomod, dirs...)
		case "github-actions", "docker":
			assert.Equal(t, []string{"/"}, dirs, "%s: the workflows and the Dockerfile are at the root", eco)
		}
	}
	assert.Equal(t, map[string]bool{"gomod": true, "github-actions": true, "docker": true}, ecosystems, "Dependabot keeps modules, actions and base images current")
	assert.ElementsMatch(t, goModDirs(t), gomod, "Dependabot keeps every Go module of the repository current, once")
}

// goModDirs are the directories, as Dependabot names them, of every go.mod
// in the repository (bin/ and the kind e2e's checkout of the core aside).
func goModDirs(t *testing.T) []string {
	root := manifests.Root()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && (rel == "bin" || rel == ".e2e" || rel == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			dirs = append(dirs, "/"+strings.TrimSuffix(filepath.ToSlash(filepath.Dir(rel)), "."))
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, dirs, "/")
	require.GreaterOrEqual(t, len(dirs), 7, "the main module and the tool modules of hack/tools")
	return dirs
}

// versionKeys are what hack/versions.env names, each with the form of its
// value.
var versionKeys = map[string]*regexp.Regexp{
	"CONTROLLER_GEN_VERSION": regexp.MustCompile(`^v\d+\.\d+\.\d+$`),
	"METALLB_VERSION":        regexp.MustCompile(`^v\d+\.\d+\.\d+$`),
	"HELM_VERSION":           regexp.MustCompile(`^v\d+\.\d+\.\d+$`),
	"KIND_VERSION":           regexp.MustCompile(`^v\d+\.\d+\.\d+$`),
	"ACTIONLINT_VERSION":     regexp.MustCompile(`^v\d+\.\d+\.\d+$`),
	"E2E_METALLB_VERSIONS":   regexp.MustCompile(`^v\d+\.\d+\.\d+(,v\d+\.\d+\.\d+)+$`),
	"E2E_KIND_NODE_IMAGES":   regexp.MustCompile(`^kindest/node:v\d+\.\d+\.\d+@sha256:[0-9a-f]{64}(,kindest/node:v\d+\.\d+\.\d+@sha256:[0-9a-f]{64})+$`),
	"CORE_REPOSITORY":        regexp.MustCompile(`^[A-Za-z0-9-]+/[A-Za-z0-9._-]+$`),
	"CORE_COMMIT":            regexp.MustCompile(`^[0-9a-f]{40}$`),
}

// readVersions reads hack/versions.env: comments, blank lines and KEY=value
// lines, each key once, every key of versionKeys and no other, each value
// of its form.
func readVersions(t *testing.T) map[string]string {
	v := map[string]string{}
	for i, l := range strings.Split(readRepo(t, "hack/versions.env"), "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, val, ok := strings.Cut(l, "=")
		require.True(t, ok && regexp.MustCompile(`^[A-Z0-9_]+$`).MatchString(k), "hack/versions.env:%d: KEY=value, got %q", i+1, l)
		_, dup := v[k]
		require.False(t, dup, "hack/versions.env names %s twice", k)
		re, known := versionKeys[k]
		require.True(t, known, "hack/versions.env:%d: %s is not a key the tests know", i+1, k)
		require.Regexp(t, re, val, "hack/versions.env:%d: %s", i+1, k)
		v[k] = val
	}
	for k := range versionKeys {
		require.Contains(t, v, k, "hack/versions.env names %s", k)
	}
	return v
}

// TestSupplyChainVersions: each version Dependabot cannot see is named once,
// in hack/versions.env. The Makefile takes each from there (and still lets
// the command line or the environment override it, as the kind e2e's
// matrix does with METALLB_VERSION); the workflows name no version, kind
// node image, commit or core repository of their own; a script's fallback
// default is the file's; the README names the same ones.
func TestSupplyChainVersions(t *testing.T) {
	v := readVersions(t)

	mk := readRepo(t, "Makefile")
	makeVars := []string{"CONTROLLER_GEN_VERSION", "METALLB_VERSION", "HELM_VERSION", "KIND_VERSION", "ACTIONLINT_VERSION"}
	for _, k := range makeVars {
		assert.Regexp(t, `(?m)^`+k+` \?= \$\(call version,`+k+`\)$`, mk, "the Makefile takes %s from hack/versions.env", k)
	}
	assert.NotRegexp(t, `\bv\d+\.\d+\.\d+\b`, mk, "the Makefile names no version of its own")

	// What make resolves, and that an override still wins.
	printer := filepath.Join(t.TempDir(), "print.mk")
	var rule strings.Builder
	rule.WriteString("print-versions:\n")
	for _, k := range makeVars {
		rule.WriteString("\t@echo " + k + "=$(" + k + ")\n")
	}
	require.NoError(t, os.WriteFile(printer, []byte(rule.String()), 0o644))
	out, err := makeIn("-s", "-f", "Makefile", "-f", printer, "print-versions")
	require.NoError(t, err, "%s", out)
	for _, k := range makeVars {
		assert.Contains(t, string(out), k+"="+v[k]+"\n", "make resolves %s from hack/versions.env", k)
	}
	out, err = makeIn("-s", "-f", "Makefile", "-f", printer, "print-versions", "KIND_VERSION=v0.0.1")
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "KIND_VERSION=v0.0.1\n", "the command line wins")
	out, err = makeEnv([]string{"METALLB_VERSION=v0.0.2"}, "-s", "-f", "Makefile", "-f", printer, "print-versions")
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "METALLB_VERSION=v0.0.2\n", "the environment wins (the kind e2e's matrix)")

	// The scripts' fallbacks, ${KEY:-default}, are the file's.
	scripts, err := filepath.Glob(filepath.Join(manifests.Root(), "hack", "*.sh"))
	require.NoError(t, err)
	fallback := regexp.MustCompile(`\$\{([A-Z0-9_]+):-([^}]*)\}`)
	for _, s := range scripts {
		for _, m := range fallback.FindAllStringSubmatch(readFileString(t, s), -1) {
			if want, ok := v[m[1]]; ok {
				assert.Equal(t, want, m[2], "%s: the fallback of %s is hack/versions.env's", filepath.Base(s), m[1])
			}
		}
	}

	// The workflows take every version from hack/versions.env (or go.mod):
	// apart from the actions' pins, they name none.
	// owner/address-controller, alone or in an image name (not a path).
	core := regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])(?:ghcr\.io/)?([A-Za-z0-9][A-Za-z0-9-]*/address-controller)\b`)
	for name, text := range workflowTexts(t) {
		body := usesLine.ReplaceAllString(text, "")
		assert.NotRegexp(t, `\bv\d+\.\d+\.\d+\b`, body, "%s names a version: take it from hack/versions.env", name)
		assert.NotContains(t, body, "kindest/node", "%s names a node image: E2E_KIND_NODE_IMAGES", name)
		assert.NotRegexp(t, `\b[0-9a-f]{40}\b`, body, "%s names a commit: CORE_COMMIT", name)
		assert.NotContains(t, body, "@sha256:", "%s names a digest", name)
		for _, m := range core.FindAllStringSubmatch(body, -1) {
			assert.Equal(t, v["CORE_REPOSITORY"], m[1], "%s: the core lives at %s", name, v["CORE_REPOSITORY"])
		}
	}

	// The README names the same.
	readme := readRepo(t, "README.md")
	want := []string{"kind " + v["KIND_VERSION"], "Helm " + v["HELM_VERSION"], v["METALLB_VERSION"] + " (the default", "`" + v["CORE_REPOSITORY"] + "`", "commit `" + v["CORE_COMMIT"][:7] + "`", "checkout " + v["CORE_COMMIT"][:7]}
	for _, m := range strings.Split(v["E2E_METALLB_VERSIONS"], ",") {
		want = append(want, m)
	}
	for _, n := range strings.Split(v["E2E_KIND_NODE_IMAGES"], ",") {
		k8s, _, _ := strings.Cut(strings.TrimPrefix(n, "kindest/node:"), "@")
		want = append(want, k8s)
	}
	for _, w := range want {
		assert.Contains(t, readme, w, "the README says what hack/versions.env says")
	}
}
