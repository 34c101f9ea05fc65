package layout

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goFileInBackticks is a file of the tree as docs/design.md names one:
// `hold.go`, `marks/keys.go`, `internal/recorder/gateway.go`.
var goFileInBackticks = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)`")

// designLines is the most docs/design.md may hold: a design a newcomer
// reads in one sitting. Detail only a test needs lives beside that test.
const designLines = 700

// TestDesignIsReadInOneSitting keeps docs/design.md within designLines.
func TestDesignIsReadInOneSitting(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "design.md"))
	require.NoError(t, err)
	lines := strings.Count(string(doc), "\n")
	assert.LessOrEqual(t, lines, designLines, "docs/design.md has %d lines", lines)
}

// TestDesignNamesRealFiles: every Go file docs/design.md names exists, so
// its reading guide (§13) cannot point at a file that moved or went. A
// name with a folder must end the path of a file of the code
// (`draw/inflight.go`, `internal/marks/keys.go`); a bare name must be
// some file's name.
func TestDesignNamesRealFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	require.NoError(t, err)
	tops := []string{"", "api", "cmd", "controllers", "internal", "test"}
	bases := map[string]bool{}
	var paths []string
	for _, top := range tops[1:] {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				bases[d.Name()] = true
				paths = append(paths, filepath.ToSlash(p))
			}
			return err
		})
		require.NoError(t, err)
	}
	named := 0
	for _, m := range goFileInBackticks.FindAllStringSubmatch(string(doc), -1) {
		name := m[1]
		named++
		if filepath.Base(name) == name {
			assert.True(t, bases[name], "docs/design.md names %s, which no file of the code is", name)
			continue
		}
		found := false
		for _, p := range paths {
			if strings.HasSuffix(p, "/"+name) {
				found = true
				break
			}
		}
		assert.True(t, found, "docs/design.md names %s, which does not exist", name)
	}
	assert.Greater(t, named, 50, "the files docs/design.md names were found")
}

// packageTests names a package and the tests of it a row cites:
// `controllers/claim` `TestA`, `TestB` (with an optional note after each).
var packageTests = regexp.MustCompile("`((?:controllers|internal|test)/[\\w/]+)`((?:\\s*`Test\\w+`(?:\\s*\\([^)]*\\))?,?)+)")

// TestReliabilityNamesRealTests: every test docs/reliability.md cites, as
// `package` `TestName`, is a test of that package, so the table cannot
// point at a test that moved, was renamed or went.
func TestReliabilityNamesRealTests(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "reliability.md"))
	require.NoError(t, err)
	cited := 0
	for _, m := range packageTests.FindAllStringSubmatch(string(doc), -1) {
		files, err := filepath.Glob(filepath.Join(root, m[1], "*_test.go"))
		require.NoError(t, err)
		var tests strings.Builder
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			tests.Write(b)
		}
		for _, name := range regexp.MustCompile("`(Test\\w+)`").FindAllStringSubmatch(m[2], -1) {
			cited++
			assert.Contains(t, tests.String(), "func "+name[1]+"(", "docs/reliability.md cites %s %s, which is no test of it", m[1], name[1])
		}
	}
	assert.Greater(t, cited, 50, "the tests docs/reliability.md cites were found")
}
