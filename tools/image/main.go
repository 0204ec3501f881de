// Command image builds the dualmap container image without a container
// engine: a static dualmap binary (CGO off, byte tokenizer) on an empty
// base, run as a non-root user, written as an OCI image layout and a
// `docker load` tarball. The Dockerfile at the repository root builds the
// same image (with real tokenizers) where an engine exists.
//
//	go run ./tools/image -binary bin/dualmap-static -out bin/image -tag ghcr.io/dualmap/dualmap:dev
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	var o Options
	flag.StringVar(&o.Binary, "binary", "", "static linux dualmap binary (CGO_ENABLED=0 go build ./cmd/dualmap)")
	flag.StringVar(&o.Out, "out", "bin/image", "directory for the OCI layout (out/oci) and tarball (out/dualmap.tar)")
	flag.StringVar(&o.Tag, "tag", "ghcr.io/dualmap/dualmap:dev", "image reference recorded in the tarball")
	flag.StringVar(&o.Version, "version", "dev", "org.opencontainers.image.version label")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to include (for Redis TLS and OTLP over https); \"\" for none")
	flag.StringVar(&o.Arch, "arch", "", "image architecture (default: the binary's, from its ELF header)")
	flag.Parse()
	if o.Binary == "" {
		fmt.Fprintln(os.Stderr, "image: -binary is required")
		os.Exit(2)
	}
	d, err := Build(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("image: %s %s\n  OCI layout: %s\n  tarball:    %s (docker load -i)\n", o.Tag, d, LayoutPath(o.Out), TarballPath(o.Out))
}
