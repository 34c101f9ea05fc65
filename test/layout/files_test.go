package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
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
		// A controller's own room and the rooms below it (the claim
		// binary's other controllers and the pipeline they share), each
		// named by its path under controllers/.
		err := filepath.WalkDir(filepath.Join(root, c), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			text, err := os.ReadFile(p)
			require.NoError(t, err)
			f, err := parser.ParseFile(token.NewFileSet(), p, text, parser.ParseComments|parser.SkipObjectResolution)
			require.NoError(t, err)
			room, _ := filepath.Rel(root, filepath.Dir(p))
			out = append(out, controllerFile{controller: filepath.ToSlash(room), name: filepath.Base(p), ast: f, text: string(text)})
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, out)
	return out
}

// family is the file family of a file name: "" for a controller's own
// files, "warm" for warm_plan.go (a controller beside the package's own,
// docs/design.md §13).
func family(name string) string {
	for _, f := range []string{"warm"} {
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
//     words (msg*, *Words); outside it, a recorder call (Event, Eventf,
//     AnnotatedEventf) passes words made there, never a literal, a
//     fmt.Sprint* or a + with a literal, and no fmt.Sprint* call formats a
//     sentence (three words in a row), be it an Event's, a condition's or
//     a status's (misplacedWords);
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
		if f.name != "events.go" {
			for _, w := range misplacedWords(t, f.name, f.text) {
				assert.Failf(t, "words outside events.go", "%s/%s", f.controller, w)
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

// sentence is three words of letters in a row: a text for a person, not a
// name or a key put together from parts.
var sentence = regexp.MustCompile(`[A-Za-z]+ [A-Za-z]+ [A-Za-z]+`)

// eventText returns the argument of a recorder call that carries its
// words (the last one of Event, the format of Eventf and
// AnnotatedEventf), or nil when call is no such call.
func eventText(call *ast.CallExpr) ast.Expr {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	at := -1
	switch sel.Sel.Name {
	case "Event":
		at = len(call.Args) - 1
	case "Eventf":
		at = 3 // object, type, reason, format
	case "AnnotatedEventf":
		at = 4 // object, annotations, type, reason, format
	}
	if at < 0 || at >= len(call.Args) {
		return nil
	}
	return call.Args[at]
}

// sprint returns the name of the fmt.Sprint* function call calls ("" for
// none).
func sprint(call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "fmt" || !strings.HasPrefix(sel.Sel.Name, "Sprint") {
		return ""
	}
	return sel.Sel.Name
}

// hasLiteral reports whether a string literal is part of e: e itself, or
// an operand of a + in it.
func hasLiteral(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Kind == token.STRING
	case *ast.ParenExpr:
		return hasLiteral(e.X)
	case *ast.BinaryExpr:
		return e.Op == token.ADD && (hasLiteral(e.X) || hasLiteral(e.Y))
	}
	return false
}

// operands flattens a + chain (or any other expression) into its operands,
// in order.
func operands(e ast.Expr) []ast.Expr {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return operands(e.X)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return append(operands(e.X), operands(e.Y)...)
		}
	}
	return []ast.Expr{e}
}

// stringLit returns the text of e when it is a string literal.
func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// literalText returns the text of the string literals of e, a literal or
// a + of operands: each run of literals side by side joined as Go would
// join them, and a run ending at any other operand.
func literalText(e ast.Expr) []string {
	var runs []string
	run, in := "", false
	for _, o := range operands(e) {
		if s, ok := stringLit(o); ok {
			run, in = run+s, true
			continue
		}
		if in {
			runs = append(runs, run)
		}
		run, in = "", false
	}
	if in {
		runs = append(runs, run)
	}
	return runs
}

// misplacedWords lists where the product file name (its source src)
// puts words together outside events.go: recorder calls given a literal,
// a fmt.Sprint* or a + with a literal, and fmt.Sprint* calls formatting a
// sentence. Errors (fmt.Errorf) and log lines are not looked at: they are
// the operator's, not the user's.
func misplacedWords(t *testing.T, name, src string) []string {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	require.NoError(t, err)
	var found []string
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		where := fset.Position(call.Pos()).String()
		if text := eventText(call); text != nil {
			inner, isCall := text.(*ast.CallExpr)
			if hasLiteral(text) || isCall && sprint(inner) != "" {
				found = append(found, where+": an Event's words")
			}
		}
		var texts []ast.Expr
		switch sprint(call) {
		case "":
		case "Sprintf":
			if len(call.Args) > 0 {
				texts = call.Args[:1]
			}
		default:
			texts = call.Args
		}
		for _, a := range texts {
			for _, s := range literalText(a) {
				if sentence.MatchString(s) {
					found = append(found, fmt.Sprintf("%s: formats %q", where, s))
					break
				}
			}
		}
		return true
	})
	return found
}

// TestMisplacedWords shows what misplacedWords finds, and what it leaves:
// errors, log lines, names put together, and words made by a msg* function.
func TestMisplacedWords(t *testing.T) {
	src := `package p

func f() {
	r.Recorder.Event(o, t, Reason, "The claim is gone")
	r.Recorder.Event(o, t, Reason, fmt.Sprintf("%s", x))
	r.Recorder.Event(o, t, Reason, "Claim " + name)
	r.Recorder.Eventf(o, t, Reason, "Importing %s failed", ip)
	r.Recorder.AnnotatedEventf(o, nil, t, Reason, "%s", ip)
	m := fmt.Sprintf("the Service holds %s", ip)
	m = fmt.Sprint("no such claim")
	m = fmt.Sprintf("IPAddressPool %s/%s does not "+"contain %s", a, b, c)

	r.Recorder.Event(o, t, Reason, msgGone(name))
	r.Recorder.Event(o, t, Reason, m)
	_ = fmt.Errorf("the claim %s is gone: %w", name, err)
	log.Info("address lost with no Warning", "ip", ip)
	_ = fmt.Sprintf("warm:%s:%d", f, n)
	_ = fmt.Sprintf("%s %s/%s", kind, ns, name)
	_ = fmt.Sprint("a " + kind + "of two")
	_ = errors.New("three words here")
}
`
	var lines []int
	for _, w := range misplacedWords(t, "p.go", src) {
		line, err := strconv.Atoi(strings.Split(w, ":")[1])
		require.NoError(t, err, w)
		lines = append(lines, line)
	}
	assert.Equal(t, []int{4, 5, 6, 7, 8, 9, 10, 11}, lines)
}
