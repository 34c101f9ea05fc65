package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cozystack/metallb-iad/internal/marks"
)

// serviceMarks are the keys of every mark a Service carries, by the names
// the product spells them with: MetalLB's requests, the driver's marks
// and the tenant's claim annotation.
var serviceMarks = map[string]string{
	marks.KeyPool: "KeyPool", marks.KeyPin: "KeyPin", marks.KeySharing: "KeySharing",
	marks.KeyLegacyPool: "KeyLegacyPool", marks.KeyLegacyPin: "KeyLegacyPin", marks.KeyLegacySharing: "KeyLegacySharing",
	marks.KeyPinnedBy: "KeyPinnedBy", marks.KeySharedBy: "KeySharedBy",
	marks.KeyOwnerPin: "KeyOwnerPin", marks.KeyOwnerPool: "KeyOwnerPool",
	marks.LabelGrant: "LabelGrant", marks.KeyClaim: "KeyClaim",
	marks.KeyImportedInto: "KeyImportedInto", marks.KeyMetalLBRetry: "KeyMetalLBRetry",
	marks.KeyClearsStaleAllocation: "KeyClearsStaleAllocation",
}

// TestServiceMarksHaveOneModel: in the product (not its tests), only
// internal/marks names a Service mark's key, as a constant or as the text
// itself, besides the API package that defines the claim annotation: every
// other package reads and writes a Service's marks through internal/marks.
// At most 6 files.
func TestServiceMarksHaveOneModel(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	idents := map[string]bool{"ServiceClaimAnnotation": true}
	for _, id := range serviceMarks {
		idents[id] = true
	}
	naming := map[string]bool{}
	for _, dir := range []string{"api", "cmd", "controllers", "internal"} {
		require.NoError(t, filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Ident:
					if idents[n.Name] {
						naming[path] = true
					}
				case *ast.BasicLit:
					if v, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING {
						if _, ok := serviceMarks[v]; ok || strings.HasSuffix(v, "/metallb-retry") || strings.HasSuffix(v, "/imported-into") {
							naming[path] = true
						}
					}
				}
				return true
			})
			return nil
		}))
	}
	var files []string
	for path := range naming {
		rel, _ := filepath.Rel(root, path)
		files = append(files, rel)
		dir := filepath.Dir(rel)
		assert.True(t, dir == "internal/marks" || dir == "api/v1alpha1",
			"%s names a Service mark's key: read and write it through internal/marks", rel)
	}
	sort.Strings(files)
	assert.LessOrEqual(t, len(files), 6, "files naming a Service mark's key: %v", files)
	t.Logf("files naming a Service mark's key: %v", files)
}
