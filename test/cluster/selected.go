package cluster

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// IntegrationFileSuffix names the test files whose tests and benchmarks need
// the control plane; every other test file of a package holds pure tests.
const IntegrationFileSuffix = "_integration_test.go"

// Main is the TestMain of a package with integration tests. When none is
// selected (IntegrationSelected) it runs the pure tests alone, without a
// control plane; otherwise run starts what the tests need and runs m. It
// exits with the code run returns, or with 1 after printing run's error.
func Main(m *testing.M, run func(*testing.M) (int, error)) {
	if !IntegrationSelected() {
		os.Exit(m.Run())
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

// IntegrationSelected is what a package's TestMain asks before it starts a
// control plane: it parses the test flags and reports whether this run is
// about to run a test declared in one of the package's *_integration_test.go
// files, or any benchmark. `go test -run TestDecide` therefore starts
// nothing. With -short it leaves the integration tests out (it adds them to
// -test.skip) and reports false: `go test -short` runs the pure tests alone.
// When it cannot tell (the sources cannot be read, a pattern does not
// compile) it reports true, the safe side.
func IntegrationSelected() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	tests, err := integrationTests(".")
	if err != nil {
		return true
	}
	if testing.Short() {
		if len(tests) > 0 {
			_ = flag.Set("test.skip", skipPattern(flagValue("test.skip"), tests))
		}
		return false
	}
	if flagValue("test.list") != "" {
		return false
	}
	if flagValue("test.bench") != "" {
		return true
	}
	selected, err := anySelected(tests, flagValue("test.run"), flagValue("test.skip"))
	return err != nil || selected
}

// anySelected reports whether -run pattern run and -skip pattern skip leave
// any of the top-level tests names to run.
func anySelected(names []string, run, skip string) (bool, error) {
	runRe, err := regexp.Compile(topLevel(run))
	if err != nil {
		return false, err
	}
	var skipRe *regexp.Regexp
	// A skip pattern of several levels skips only subtests: the top-level
	// test still runs.
	if parts := splitLevels(skip); skip != "" && len(parts) == 1 {
		if skipRe, err = regexp.Compile(parts[0]); err != nil {
			return false, err
		}
	}
	for _, n := range names {
		if runRe.MatchString(n) && (skipRe == nil || !skipRe.MatchString(n)) {
			return true, nil
		}
	}
	return false, nil
}

// skipPattern adds the tests names to the -skip pattern old.
func skipPattern(old string, names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	p := "^(" + strings.Join(quoted, "|") + ")$"
	if old == "" || len(splitLevels(old)) > 1 {
		// A subtest skip cannot be joined to a top-level one; the
		// integration tests matter more here.
		return p
	}
	return old + "|" + p
}

// topLevel is the part of a -run pattern that matches top-level tests.
func topLevel(pattern string) string { return splitLevels(pattern)[0] }

// splitLevels splits a -run or -skip pattern at the slashes that separate
// subtest levels, the way the testing package does: not inside brackets or
// parentheses, not when escaped.
func splitLevels(pattern string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '[', '(':
			depth++
		case ']', ')':
			if depth > 0 {
				depth--
			}
		case '/':
			if depth == 0 {
				parts = append(parts, pattern[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, pattern[start:])
}

// integrationTests lists the Test functions declared in the
// *_integration_test.go files of dir, sorted.
func integrationTests(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*"+IntegrationFileSuffix))
	if err != nil {
		return nil, err
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") && fn.Name.Name != "TestMain" {
				names = append(names, fn.Name.Name)
			}
		}
	}
	sort.Strings(names)
	return names, nil
}

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}
