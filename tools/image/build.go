package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's contract, shared with the Dockerfile and the Helm chart.
const (
	BinaryPath = "/usr/local/bin/dualmap"
	User       = "65532:65532" // nonroot, as distroless
	ConfigPath = "/etc/dualmap/config/dualmap.yaml"
)

// Ports: ext_proc gRPC, gRPC health, admin HTTP (/healthz, /readyz, /metrics).
var Ports = []string{"9002/tcp", "9003/tcp", "9090/tcp"}

// Options of one build.
type Options struct {
	Binary, Out, Tag, Version, CACerts, Arch string
}

func LayoutPath(out string) string  { return filepath.Join(out, "oci") }
func TarballPath(out string) string { return filepath.Join(out, "dualmap.tar") }

// epoch: fixed file times, so the same binary gives the same digest.
var epoch = time.Unix(0, 0).UTC()

// Build writes the image and returns its digest.
func Build(o Options) (v1.Hash, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return v1.Hash{}, err
	}
	arch, err := staticArch(o.Binary)
	if err != nil {
		return v1.Hash{}, err
	}
	if o.Arch != "" {
		arch = o.Arch
	}
	files := []file{
		{path: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{path: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{path: "home/nonroot/", mode: 0o755, dir: true, uid: 65532},
		{path: "tmp/", mode: 0o1777, dir: true},
		{path: "etc/dualmap/", mode: 0o755, dir: true},
		{path: BinaryPath[1:], mode: 0o755, data: bin},
	}
	if o.CACerts != "" {
		ca, err := os.ReadFile(o.CACerts)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("-ca-certs: %w", err)
		}
		files = append(files, file{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca})
	}
	layerTar, err := tarOf(files)
	if err != nil {
		return v1.Hash{}, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return v1.Hash{}, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{CreatedBy: "dualmap tools/image: static dualmap, CGO off", Created: v1.Time{Time: epoch}},
	})
	if err != nil {
		return v1.Hash{}, err
	}
	ports := map[string]struct{}{}
	for _, p := range Ports {
		ports[p] = struct{}{}
	}
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		RootFS:       mustRootFS(img),
		History:      mustHistory(img),
		Config: v1.Config{
			User:         User,
			Entrypoint:   []string{BinaryPath},
			Cmd:          []string{"serve", "-config=" + ConfigPath},
			WorkingDir:   "/home/nonroot",
			Env:          []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
			ExposedPorts: ports,
			Labels: map[string]string{
				"org.opencontainers.image.title":       "dualmap",
				"org.opencontainers.image.description": "KV-cache- and SLO-aware Envoy ext_proc router for LLM serving",
				"org.opencontainers.image.version":     o.Version,
				"org.opencontainers.image.source":      "https://github.com/dualmap/dualmap",
			},
		},
	})
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.RemoveAll(LayoutPath(o.Out)); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(LayoutPath(o.Out), empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.Tag})); err != nil {
		return v1.Hash{}, err
	}
	ref, err := name.NewTag(o.Tag)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("-tag: %w", err)
	}
	if err := tarball.WriteToFile(TarballPath(o.Out), ref, img); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

func mustRootFS(img v1.Image) v1.RootFS {
	cf, err := img.ConfigFile()
	if err != nil {
		panic(err)
	}
	return cf.RootFS
}

func mustHistory(img v1.Image) []v1.History {
	cf, err := img.ConfigFile()
	if err != nil {
		panic(err)
	}
	return cf.History
}

// staticArch checks the binary is a static Linux ELF (no interpreter: it
// runs on an empty base) and returns its architecture in OCI terms.
func staticArch(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: not a Linux binary: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%s is dynamically linked: build it with CGO_ENABLED=0", path)
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	}
	return "", fmt.Errorf("%s: unsupported machine %v", path, f.Machine)
}

type file struct {
	path string
	mode int64
	data []byte
	dir  bool
	uid  int
}

func tarOf(files []file) ([]byte, error) {
	// Every parent directory gets an entry before its contents: the ones
	// listed with their owner and mode, the others root-owned 0755.
	entries := map[string]file{}
	for _, f := range files {
		clean := filepath.Clean(f.path)
		for d := filepath.Dir(clean); d != "."; d = filepath.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = file{path: d, mode: 0o755, dir: true}
			}
		}
		entries[clean] = f
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for _, n := range names {
		f := entries[n]
		h := &tar.Header{Name: n, Mode: f.mode, ModTime: epoch, Uid: f.uid, Gid: f.uid, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, n+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := w.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := w.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
