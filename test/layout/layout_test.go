// Package layout checks the shape of the house: every controller binary
// carries its own controller's code and no other's.
package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/cozystack/metallb-iad"

var controllers = []string{"class", "claim", "service", "ipaddress"}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	out, err := cmd.Output()
	require.NoError(t, err, "go list %v", args)
	return strings.Fields(string(out))
}

// owner returns the controller a package belongs to ("" for none).
func owner(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, module+"/controllers/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

// TestControllersImportNoOtherController: no package under controllers/
// imports another controller's package (tests aside), and no binary's
// dependencies include another controller's code.
func TestControllersImportNoOtherController(t *testing.T) {
	raw := goList(t, "-f", `{{.ImportPath}}:{{join .Imports ","}}`, "./controllers/...")
	require.NotEmpty(t, raw)
	for _, l := range raw {
		pkg, imports, _ := strings.Cut(l, ":")
		for _, imp := range strings.Split(imports, ",") {
			if o := owner(imp); o != "" && o != owner(pkg) {
				assert.Failf(t, "a controller imports another", "%s imports %s", pkg, imp)
			}
		}
	}
	for _, c := range controllers {
		for _, dep := range goList(t, "-deps", "./cmd/"+c) {
			if o := owner(dep); o != "" && o != c {
				assert.Failf(t, "a binary carries another controller", "cmd/%s depends on %s", c, dep)
			}
		}
	}
}

func TestOwner(t *testing.T) {
	assert.Equal(t, "claim", owner(module+"/controllers/claim"))
	// A package a controller may grow below its folder belongs to it.
	assert.Equal(t, "claim", owner(module+"/controllers/claim/sub"))
	assert.Equal(t, "", owner(module+"/internal/classparams"))
}

// TestEveryControllerHasTheGuardedQueue: every controller a package under
// controllers/ builds takes its options through queue.WithQueue, so no
// controller stops on controller-runtime's unguarded queue (internal/queue
// says why). A builder's WithOptions call is where a controller gets its
// queue.
var (
	anyOptions     = regexp.MustCompile(`\bWithOptions\(`)
	guardedOptions = regexp.MustCompile(`\bWithOptions\(queue\.WithQueue\(`)
)

func TestEveryControllerHasTheGuardedQueue(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	files, err := filepath.Glob(filepath.Join(root, "controllers", "*", "*.go"))
	require.NoError(t, err)
	builds := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		src := string(b)
		n := strings.Count(src, "NewControllerManagedBy(")
		builds += n
		guarded := len(guardedOptions.FindAllString(src, -1))
		assert.Equal(t, n, guarded, "%s: each controller it builds takes queue.WithQueue's options", filepath.Base(f))
		assert.Equal(t, len(anyOptions.FindAllString(src, -1)), guarded,
			"%s: every WithOptions goes through queue.WithQueue", filepath.Base(f))
	}
	assert.GreaterOrEqual(t, builds, len(controllers), "the check finds the controllers' builders")
}

// TestOneControllerPerRoom: no package under controllers/ builds more than
// one controller (a controller-runtime builder), and none holds more than
// 20 product files: the claim binary's three controllers, the draw
// pipeline two of them share, and the ipaddress controller's hold are
// rooms of their own.
func TestOneControllerPerRoom(t *testing.T) {
	perRoom := map[string]int{}
	files := map[string]int{}
	for _, f := range controllerFiles(t) {
		files[f.controller]++
		perRoom[f.controller] += strings.Count(f.text, "NewControllerManagedBy(")
	}
	rooms := 0
	for room, n := range perRoom {
		rooms++
		assert.LessOrEqual(t, n, 1, "controllers/%s builds %d controllers", room, n)
		assert.LessOrEqual(t, files[room], 20, "controllers/%s holds %d product files", room, files[room])
	}
	assert.GreaterOrEqual(t, rooms, 8, "the rooms under controllers/ were found")
}
