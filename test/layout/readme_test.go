package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// stringConstants evaluates the string constants of the package in dir
// that are literals, other constants of the package, or sums of those.
func stringConstants(t *testing.T, dir string) map[string]string {
	values, _ := constantsByFile(t, dir)
	return values
}

// driverDomain is names.Domain, which key constants outside internal/names
// are built from.
const driverDomain = "metallb.drivers.local.sdn.cozystack.io/"

// constantsByFile is stringConstants with, for each constant, the file
// declaring it. A reference to names.Domain evaluates to driverDomain.
func constantsByFile(t *testing.T, dir string) (map[string]string, map[string]string) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	exprs := map[string]ast.Expr{}
	where := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						exprs[n.Name] = vs.Values[i]
						where[n.Name] = filepath.Base(f)
					}
				}
			}
		}
	}
	values := map[string]string{}
	var eval func(ast.Expr) (string, bool)
	eval = func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		case *ast.Ident:
			v, ok := values[e.Name]
			return v, ok
		case *ast.BinaryExpr:
			l, lok := eval(e.X)
			r, rok := eval(e.Y)
			return l + r, lok && rok && e.Op == token.ADD
		case *ast.ParenExpr:
			return eval(e.X)
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok && x.Name == "names" && e.Sel.Name == "Domain" {
				return driverDomain, true
			}
		}
		return "", false
	}
	for changed := true; changed; {
		changed = false
		for name, e := range exprs {
			if _, done := values[name]; done {
				continue
			}
			if v, ok := eval(e); ok {
				values[name] = v
				changed = true
			}
		}
	}
	return values, where
}

// TestReadmeNamesEveryKey: the README's reference of annotations and labels
// names every key the driver and the core's API define (a constant of
// internal/names, internal/marks, internal/stale or api/v1alpha1 shaped like
// prefix/name), so a key added
// to the code without a line for its users fails here.
func TestReadmeNamesEveryKey(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	found := 0
	for _, dir := range []string{"internal/names", "internal/marks", "internal/stale", "api/v1alpha1"} {
		for name, v := range stringConstants(t, filepath.Join(root, dir)) {
			host, key, ok := strings.Cut(v, "/")
			if !ok || key == "" || !strings.Contains(host, ".") || strings.ContainsAny(v, " %") {
				continue // not an annotation, label or finalizer key
			}
			found++
			if !readmeNames(string(readme), host, key) {
				t.Errorf("README names no `%s` (%s.%s)", v, dir, name)
			}
		}
	}
	assert.Greater(t, found, 30, "the key constants were found")
}

// TestKeysLiveInMarks: every label, annotation or finalizer key of the
// product (a constant shaped like prefix/name under a Kubernetes-style
// domain) is declared in internal/marks/keys.go, where
// TestReadmeNamesEveryKey finds it; api/v1alpha1 holds the core's own.
func TestKeysLiveInMarks(t *testing.T) {
	root := filepath.Join("..", "..")
	var dirs []string
	for _, top := range []string{"internal", "controllers", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return err
		})
		require.NoError(t, err)
	}
	keys := 0
	for _, dir := range dirs {
		values, where := constantsByFile(t, dir)
		for name, v := range values {
			if !isKey(v) {
				continue
			}
			rel, _ := filepath.Rel(root, filepath.Join(dir, where[name]))
			if rel == filepath.Join("internal", "marks", "keys.go") {
				keys++
				continue
			}
			t.Errorf("%s declares the key %s = %q: declare it in internal/marks/keys.go", rel, name, v)
		}
	}
	assert.Greater(t, keys, 30, "the keys of internal/marks/keys.go were found")
}

// isKey reports whether v is shaped like a label, annotation or finalizer
// key under a domain: prefix/name, the prefix a dotted host.
func isKey(v string) bool {
	host, name, ok := strings.Cut(v, "/")
	if !ok || name == "" || strings.ContainsAny(v, " %") || !strings.Contains(host, ".") {
		return false
	}
	for _, d := range []string{".io", ".tf", ".k8s.io"} {
		if strings.HasSuffix(host, d) {
			return true
		}
	}
	return false
}

// readmeNames reports whether the README names the key host/key: in full,
// as `…/key` for the driver's own prefix (which its table shortens), or,
// for MetalLB's legacy prefix, through the sentence naming its spellings.
func readmeNames(readme, host, key string) bool {
	switch {
	case strings.Contains(readme, "`"+host+"/"+key+"`"):
		return true
	case host == "metallb.drivers.local.sdn.cozystack.io":
		return strings.Contains(readme, "`…/"+key+"`")
	case host == "metallb.universe.tf":
		return strings.Contains(readme, "`metallb.universe.tf/` spellings")
	}
	return false
}

// TestProjectFile: PROJECT declares the core's three kinds as external
// (owned by the address-controller core, not created by this project), and
// no API of this project's own.
func TestProjectFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "PROJECT"))
	require.NoError(t, err)
	var project struct {
		Resources []struct {
			Kind     string         `json:"kind"`
			External bool           `json:"external"`
			Core     bool           `json:"core"`
			API      map[string]any `json:"api"`
		} `json:"resources"`
	}
	require.NoError(t, yaml.Unmarshal(b, &project))
	external := map[string]bool{}
	for _, r := range project.Resources {
		assert.Nil(t, r.API, "%s: this project defines no API of its own", r.Kind)
		assert.True(t, r.External || r.Core, "%s is the core's or Kubernetes'", r.Kind)
		external[r.Kind] = r.External
	}
	for _, kind := range []string{"IPAddressClass", "IPAddressClaim", "IPAddress"} {
		assert.True(t, external[kind], "%s is external", kind)
	}
}

// TestIntegrationFilesCarryTheTag: every test file that starts the control
// plane is an integration file (named *_integration_test.go, built only
// with -tags integration), so `make test-unit` starts nothing and `make
// test` leaves none of them out.
func TestIntegrationFilesCarryTheTag(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(b)
		tagged := strings.HasPrefix(src, "//go:build integration\n")
		named := strings.HasSuffix(path, "_integration_test.go")
		if named && !tagged {
			t.Errorf("%s: an integration file without //go:build integration", path)
		}
		if tagged && !named {
			t.Errorf("%s: tagged integration but not named *_integration_test.go", path)
		}
		if !tagged && (strings.Contains(src, "\tfixture.Main(m") || strings.Contains(src, "\tcluster.Main(m")) {
			t.Errorf("%s starts the control plane without the integration tag", path)
		}
		return nil
	})
	require.NoError(t, err)
}
