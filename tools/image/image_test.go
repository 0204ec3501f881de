package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage builds the router without cgo, makes the image daemonless, and
// reads both outputs back: the config (non-root user, entrypoint, ports),
// the layer (the binary, executable, and it runs), the same digest twice.
func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("builds a linux image from a native binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "dualmap")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/dualmap")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	o := Options{Binary: bin, Out: filepath.Join(dir, "out"), Tag: "example.com/dualmap:test", Version: "test"}
	digest, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}

	// The OCI layout.
	idx, err := layout.ImageIndexFromPath(LayoutPath(o.Out))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != digest {
		t.Fatalf("layout index %+v, want one image %s", m.Manifests, digest)
	}
	img, err := idx.Image(digest)
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, img, dir)

	// The tarball (docker save format, so its manifest differs): the same
	// config, hence the same layers and settings.
	ref, _ := name.NewTag(o.Tag)
	timg, err := tarball.ImageFromPath(TarballPath(o.Out), &ref)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.ConfigName()
	if got, err := timg.ConfigName(); err != nil || got != want {
		t.Errorf("tarball image config %s (%v), layout %s", got, err, want)
	}

	// Reproducible: the same binary gives the same digest.
	o.Out = filepath.Join(dir, "again")
	if d, err := Build(o); err != nil || d != digest {
		t.Errorf("rebuild: %s, %v; first %s", d, err, digest)
	}
}

func checkImage(t *testing.T, img v1.Image, dir string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	if c.User == "" || strings.HasPrefix(c.User, "0") || c.User == "root" {
		t.Errorf("user %q is root", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/dualmap"}) {
		t.Errorf("entrypoint %q", c.Entrypoint)
	}
	if len(c.Cmd) == 0 || c.Cmd[0] != "serve" {
		t.Errorf("cmd %q", c.Cmd)
	}
	for _, p := range []string{"9002/tcp", "9003/tcp", "9090/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed: %v", p, c.ExposedPorts)
		}
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var found bool
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if d := filepath.Dir(strings.TrimSuffix(h.Name, "/")); d != "." && !seen[d] {
			t.Errorf("%s comes before its directory %s", h.Name, d)
		}
		seen[strings.TrimSuffix(h.Name, "/")] = true
		if h.Name != "usr/local/bin/dualmap" {
			continue
		}
		found = true
		if h.Mode&0o111 == 0 || h.Uid != 0 {
			t.Errorf("binary mode %o uid %d", h.Mode, h.Uid)
		}
		// The binary in the layer runs.
		out := filepath.Join(dir, "from-layer")
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		f.Close()
		got, err := exec.Command(out, "config", "defaults").CombinedOutput()
		if err != nil || !strings.Contains(string(got), "x-gateway-destination-endpoint") {
			t.Errorf("dualmap config defaults from the image: %v\n%s", err, got)
		}
	}
	if !found {
		t.Error("no usr/local/bin/dualmap in the layer")
	}
}

func TestStaticArchRejectsDynamic(t *testing.T) {
	// /bin/sh is dynamically linked on every distribution we build on.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	sh, _ = filepath.EvalSymlinks(sh)
	if _, err := staticArch(sh); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("staticArch(%s) = %v, want a dynamic-linking error", sh, err)
	}
}
