package node

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cozystack/metallb-iad/test/manifests"
)

// Image is a container image built without a container engine: an empty
// base and one layer of static binaries at the root, as the Dockerfile's
// distroless image lays them out.
type Image struct {
	// Ref names the image, e.g. ghcr.io/cozystack/metallb-iad:node.
	Ref string
	// Files maps a path in the image ("/class") to a binary on this machine.
	Files map[string]string
	// Entrypoint of the image (empty: the Deployment names the command).
	Entrypoint []string
	// User the image runs as (the Dockerfile's is 65532:65532).
	User string
}

// WriteTarball writes the image as a docker-archive tarball at path, ready
// for `ctr images import`.
func (im Image) WriteTarball(path string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	for dst, src := range im.Files {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.Clean("." + dst), Mode: 0o755, Size: int64(len(b)), ModTime: mtime, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Entrypoint: im.Entrypoint, User: im.User, Env: []string{"PATH=/"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	ref, err := name.NewTag(im.Ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(path, ref, img)
}

// buildStatic builds a main package of this module as a static binary the
// way the Dockerfile does.
func buildStatic(out, pkg string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = manifests.Root()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v: %s", pkg, err, b)
	}
	return nil
}
