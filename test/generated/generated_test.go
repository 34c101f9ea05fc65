// Package generated checks that every generated file in the tree is what
// controller-gen makes from the current sources: CRDs, deepcopy, the
// per-controller ClusterRoles and their copies in the chart.
package generated

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cozystack/metallb-iad/test/manifests"
)

const hint = "generated files are stale: run `make manifests generate` and commit the result"

var controllers = []string{"class", "claim", "service", "ipaddress"}

func controllerGen(t *testing.T) string {
	t.Helper()
	p := filepath.Join(manifests.Root(), "bin", "controller-gen")
	_, err := os.Stat(p)
	require.NoError(t, err, "bin/controller-gen is missing: `make test` installs it")
	return p
}

func run(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
}

func sameFiles(t *testing.T, wantDir, gotDir string) {
	t.Helper()
	want, err := filepath.Glob(filepath.Join(wantDir, "*"))
	require.NoError(t, err)
	got, err := filepath.Glob(filepath.Join(gotDir, "*"))
	require.NoError(t, err)
	base := func(l []string) []string {
		var out []string
		for _, p := range l {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	require.ElementsMatch(t, base(want), base(got), "%s: %s", gotDir, hint)
	for _, w := range want {
		a, err := os.ReadFile(w)
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(gotDir, filepath.Base(w)))
		require.NoError(t, err)
		assert.Equal(t, string(a), string(b), "%s: %s", filepath.Join(gotDir, filepath.Base(w)), hint)
	}
}

// TestCRDsAreCurrent regenerates the CRDs and compares them with
// config/crd/bases and the chart's copy.
func TestCRDsAreCurrent(t *testing.T) {
	root := manifests.Root()
	out := t.TempDir()
	run(t, root, controllerGen(t), "crd", "paths=./api/...", "output:crd:artifacts:config="+out)
	sameFiles(t, out, filepath.Join(root, "config", "crd", "bases"))
	sameFiles(t, out, filepath.Join(root, "chart", "metallb-iad", "files", "crds"))
}

// TestRolesAreCurrent regenerates each controller's ClusterRole from its
// RBAC markers and compares it with config/rbac/<c>/role.yaml and the
// chart's copy.
func TestRolesAreCurrent(t *testing.T) {
	root := manifests.Root()
	for _, c := range controllers {
		t.Run(c, func(t *testing.T) {
			out := t.TempDir()
			run(t, root, controllerGen(t), "rbac:roleName=metallb-iad-"+c, "paths=./controllers/"+c+"/...", "output:rbac:artifacts:config="+out)
			want, err := os.ReadFile(filepath.Join(out, "role.yaml"))
			require.NoError(t, err)
			for _, p := range []string{
				filepath.Join(root, "config", "rbac", c, "role.yaml"),
				filepath.Join(root, "chart", "metallb-iad", "files", "rbac", c+".yaml"),
			} {
				got, err := os.ReadFile(p)
				require.NoError(t, err, hint)
				assert.Equal(t, string(want), string(got), "%s: %s", p, hint)
			}
		})
	}
}

// TestDeepCopyIsCurrent regenerates the deepcopy code in a scratch copy of
// the module and compares it with api/v1alpha1/zz_generated.deepcopy.go.
func TestDeepCopyIsCurrent(t *testing.T) {
	root := manifests.Root()
	scratch := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum", "hack/boilerplate.go.txt"} {
		copyFile(t, filepath.Join(root, f), filepath.Join(scratch, f))
	}
	srcs, err := filepath.Glob(filepath.Join(root, "api", "v1alpha1", "*.go"))
	require.NoError(t, err)
	for _, s := range srcs {
		if strings.HasPrefix(filepath.Base(s), "zz_generated") || strings.HasSuffix(s, "_test.go") {
			continue
		}
		copyFile(t, s, filepath.Join(scratch, "api", "v1alpha1", filepath.Base(s)))
	}
	run(t, scratch, controllerGen(t), "object:headerFile=hack/boilerplate.go.txt", "paths=./api/...")
	want, err := os.ReadFile(filepath.Join(scratch, "api", "v1alpha1", "zz_generated.deepcopy.go"))
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(root, "api", "v1alpha1", "zz_generated.deepcopy.go"))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), hint)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
	require.NoError(t, os.WriteFile(to, b, 0o644))
}
