package soak

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoRoot is the repository's root, from this package's folder.
const repoRoot = "../.."

// warningReasonsInCode returns every Warning reason the driver's code can
// record, by the file declaring it: each Reason constant of controllers/
// and internal/ whose comment says Warning, and each constant handed to a
// recorder, or set in a verdict, beside corev1.EventTypeWarning. The
// second catches a Warning whose constant's comment forgot to say so.
func warningReasonsInCode(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	consts := map[string]string{}    // identifier -> value
	constFile := map[string]string{} // identifier -> file
	said := map[string]bool{}        // identifiers documented as Warning
	used := map[string]bool{}        // identifiers used beside EventTypeWarning
	comment := func(gs ...*ast.CommentGroup) string {
		var b strings.Builder
		for _, g := range gs {
			if g != nil {
				b.WriteString(g.Text())
			}
		}
		return b.String()
	}
	for _, dir := range []string{"controllers", "internal"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(repoRoot, path)
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GenDecl:
					if n.Tok != token.CONST {
						return true
					}
					for _, spec := range n.Specs {
						vs := spec.(*ast.ValueSpec)
						for i, id := range vs.Names {
							if !strings.HasPrefix(id.Name, "Reason") || i >= len(vs.Values) {
								continue
							}
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								v, _ := strconv.Unquote(lit.Value)
								consts[id.Name+"@"+filepath.Dir(rel)] = v
								constFile[id.Name+"@"+filepath.Dir(rel)] = rel
							}
							doc := comment(vs.Doc, vs.Comment)
							if len(n.Specs) == 1 {
								doc += comment(n.Doc)
							}
							if regexp.MustCompile(`\bWarning\b`).MatchString(doc) {
								said[id.Name+"@"+filepath.Dir(rel)] = true
							}
						}
					}
				case *ast.CallExpr:
					collectBesideWarning(n.Args, filepath.Dir(rel), used)
				case *ast.CompositeLit:
					collectBesideWarning(n.Elts, filepath.Dir(rel), used)
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	out := map[string]string{}
	for id := range said {
		if v, ok := consts[id]; ok {
			out[v] = constFile[id]
		}
	}
	for id := range used {
		v, ok := consts[id]
		require.True(t, ok, "%s is recorded as a Warning but is no string constant of its package", id)
		assert.True(t, said[id], "%s (%q) is recorded as a Warning: its comment must say so", id, v)
		out[v] = constFile[id]
	}
	return out
}

// collectBesideWarning records the Reason identifiers among exprs when
// corev1.EventTypeWarning is one of them (a recorder call, a pending
// Event) or a keyed element of them (a verdict).
func collectBesideWarning(exprs []ast.Expr, pkg string, used map[string]bool) {
	isWarning := func(e ast.Expr) bool {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			e = kv.Value
		}
		sel, ok := e.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "EventTypeWarning"
	}
	warn := false
	for _, e := range exprs {
		warn = warn || isWarning(e)
	}
	if !warn {
		return
	}
	for _, e := range exprs {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			e = kv.Value
		}
		if id, ok := e.(*ast.Ident); ok && strings.HasPrefix(id.Name, "Reason") {
			used[id.Name+"@"+pkg] = true
		}
	}
}

// warningTable reads the reasons of docs/reliability.md's table of every
// Warning the driver records.
func warningTable(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "reliability.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n## Every Warning the driver records\n")
	require.True(t, ok, "docs/reliability.md has the section of every Warning")
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([A-Za-z]+)` \\|")
	var out []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestWarningTable keeps docs/reliability.md's table of Warnings and the
// code in step, and every Warning judged by the soak: a reason added
// without a row, a row without a reason, or a reason the soak has no
// verdict for fails.
func TestWarningTable(t *testing.T) {
	code := warningReasonsInCode(t)
	table := warningTable(t)
	require.NotEmpty(t, code)
	var inCode []string
	for r := range code {
		inCode = append(inCode, r)
	}
	sort.Strings(inCode)
	rows := map[string]bool{}
	for _, r := range table {
		assert.False(t, rows[r], "reason %s has two rows", r)
		rows[r] = true
		_, ok := code[r]
		assert.True(t, ok, "docs/reliability.md has a row for %s, which the code never records as a Warning", r)
	}
	for _, r := range inCode {
		assert.True(t, rows[r], "%s records Warning %s: add its row to docs/reliability.md", code[r], r)
		_, judged := warningCauses[r]
		assert.True(t, judged, "the soak has no verdict for Warning %s (warningCauses in warnings.go)", r)
	}
	for r := range warningCauses {
		_, ok := code[r]
		assert.True(t, ok, "the soak judges Warning %s, which the code never records", r)
	}
}

// TestWarningScanner: the scanner finds Warnings however they are written.
func TestWarningScanner(t *testing.T) {
	src := `package p
const (
	ReasonA = "A" // Warning: documented
	ReasonB = "B"
	ReasonC = "C" // Normal
)
func f() {
	r.Recorder.Event(o, corev1.EventTypeWarning, ReasonB, "m")
	_ = Verdict{EventType: corev1.EventTypeWarning, Reason: ReasonC}
	_ = pendingEvent{o, corev1.EventTypeNormal, ReasonC, "m"}
}`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.ParseComments)
	require.NoError(t, err)
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			collectBesideWarning(n.Args, "p", used)
		case *ast.CompositeLit:
			collectBesideWarning(n.Elts, "p", used)
		}
		return true
	})
	assert.Equal(t, map[string]bool{"ReasonB@p": true, "ReasonC@p": true}, used)
}
