package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// controllerFile is one product file of a controller package, parsed.
type controllerFile struct {
	controller, name string
	ast              *ast.File
	text             string
}

// controllerFiles parses the product files (no tests) of every controller.
func controllerFiles(t *testing.T) []controllerFile {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "controllers")
	var out []controllerFile
	for _, c := range controllers {
		paths, err := filepath.Glob(filepath.Join(root, c, "*.go"))
		require.NoError(t, err)
		for _, p := range paths {
			if strings.HasSuffix(p, "_test.go") {
				continue
			}
			text, err := os.ReadFile(p)
			require.NoError(t, err)
			f, err := parser.ParseFile(token.NewFileSet(), p, text, parser.ParseComments|parser.SkipObjectResolution)
			require.NoError(t, err)
			out = append(out, controllerFile{controller: c, name: filepath.Base(p), ast: f, text: string(text)})
		}
	}
	require.NotEmpty(t, out)
	return out
}

// family is the file family of a file name: "" for a controller's own
// files, "warm" for warm_plan.go (a controller beside the package's own,
// docs/design.md §13).
func family(name string) string {
	for _, f := range []string{"warm", "placeholder_gc"} {
		if strings.HasPrefix(name, f+"_") || name == f+".go" {
			return f
		}
	}
	return ""
}

// TestFileConvention keeps the file convention of docs/design.md §13: the
// same file name means the same thing in every controller.
//   - <controller>_controller.go (and <family>_controller.go) alone holds a
//     Reconcile method and the RBAC markers;
//   - scope.go (<family>_scope.go) alone defines the pass's scope type, and
//     every controller has one;
//   - events.go alone declares Event reasons (Reason*) and puts things in
//     words (msg*, *Words);
//   - metrics.go alone registers metrics;
//   - <concern>_plan.go decides: it does no I/O (it has no context, nor
//     internal/patch), and <concern>.go (or <concern>_controller.go), which
//     applies it, stands beside it.
func TestFileConvention(t *testing.T) {
	files := controllerFiles(t)
	have := map[string]bool{}
	for _, f := range files {
		have[f.controller+"/"+f.name] = true
	}
	scopes := map[string]int{}
	for _, f := range files {
		where := f.controller + "/" + f.name
		controllerFile := strings.HasSuffix(f.name, "_controller.go")
		if strings.Contains(f.text, "+kubebuilder:rbac") && !controllerFile {
			assert.Failf(t, "RBAC markers outside a _controller.go", "%s", where)
		}
		for _, d := range f.ast.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				switch {
				case d.Recv != nil && name == "Reconcile" && !controllerFile:
					assert.Failf(t, "Reconcile outside a _controller.go", "%s", where)
				case d.Recv == nil && (strings.HasPrefix(name, "msg") || strings.HasSuffix(name, "Words")) && f.name != "events.go":
					assert.Failf(t, "words outside events.go", "%s defines %s", where, name)
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						if n := sp.Name.Name; n == "scope" || strings.HasSuffix(n, "Scope") {
							if f.name != "scope.go" && f.name != family(f.name)+"_scope.go" {
								assert.Failf(t, "a scope outside scope.go", "%s defines %s", where, n)
							}
							scopes[f.controller]++
						}
					case *ast.ValueSpec:
						for _, id := range sp.Names {
							if d.Tok == token.CONST && strings.HasPrefix(id.Name, "Reason") && f.name != "events.go" {
								assert.Failf(t, "an Event reason outside events.go", "%s declares %s", where, id.Name)
							}
						}
					}
				}
			}
		}
		if strings.Contains(f.text, "prometheus.New") && f.name != "metrics.go" {
			assert.Failf(t, "metrics outside metrics.go", "%s", where)
		}
		concern, isPlan := strings.CutSuffix(f.name, "_plan.go")
		if !isPlan {
			continue
		}
		applies := have[f.controller+"/"+concern+".go"] || have[f.controller+"/"+concern+"_controller.go"]
		assert.True(t, applies, "%s decides, and no %s.go beside it applies", where, concern)
		for _, imp := range f.ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch path {
			case "context", module + "/internal/patch":
				assert.Failf(t, "a plan does I/O", "%s imports %s", where, path)
			}
		}
	}
	for _, c := range controllers {
		assert.True(t, have[c+"/scope.go"], "controllers/%s has no scope.go", c)
		assert.True(t, have[c+"/events.go"], "controllers/%s has no events.go", c)
		assert.True(t, have[c+"/"+c+"_controller.go"], "controllers/%s has no %s_controller.go", c, c)
	}
}
