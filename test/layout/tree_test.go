package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStoriesAndBenchmarksLiveInTest: the tests beside the code under
// controllers/ and internal/ test that code; a story of the whole system
// lives in test/e2e and a benchmark in test/bench. No *_test.go there has
// e2e in its name or declares a Benchmark function.
func TestStoriesAndBenchmarksLiveInTest(t *testing.T) {
	root := filepath.Join("..", "..")
	files := 0
	for _, dir := range []string{"controllers", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
				return err
			}
			files++
			rel, _ := filepath.Rel(root, path)
			if strings.Contains(strings.ToLower(d.Name()), "e2e") {
				t.Errorf("%s: an end-to-end story belongs in test/e2e", rel)
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Benchmark") {
					t.Errorf("%s: %s belongs in test/bench", rel, fn.Name.Name)
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	assert.Greater(t, files, 20, "the test files under controllers/ and internal/ were found")
}
