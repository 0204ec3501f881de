# syntax=docker/dockerfile:1
# dualmap container image: docker build -t dualmap . (make image).
#
# Stages: the Go module sources; libtokenizers (Rust, the Hugging Face
# tokenizers behind the Go binding github.com/daulet/tokenizers); the
# router built with real tokenizers; a minimal non-root runtime. The
# "static" target is the router without cgo (prompts measured with the byte
# approximation) on an empty-ish base, the image tools/image builds without
# a container engine (make image-oci):
#   docker build --target static -t dualmap:static .
ARG GO_VERSION=1.26
ARG RUST_VERSION=1.90
ARG TOKENIZERS_VERSION=1.22.1

FROM golang:${GO_VERSION}-bookworm AS modules
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download

FROM rust:${RUST_VERSION}-bookworm AS tokenizers
ARG TOKENIZERS_VERSION
# The Rust crate ships inside the Go module: the exact source the Go
# binding expects.
COPY --from=modules /go/pkg/mod/github.com/daulet/tokenizers@v${TOKENIZERS_VERSION} /build
WORKDIR /build
RUN cargo build --release --locked && test -f target/release/libtokenizers.a

FROM modules AS build
ARG VERSION=dev
COPY . .
COPY --from=tokenizers /build/target/release/libtokenizers.a /usr/local/lib/
RUN CGO_ENABLED=1 CGO_LDFLAGS="-L/usr/local/lib" go build -trimpath -tags tokenizers \
      -ldflags "-s -w -X main.version=${VERSION}" -o /out/dualmap ./cmd/dualmap \
 && /out/dualmap config defaults >/dev/null

FROM modules AS build-static
ARG VERSION=dev
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/dualmap ./cmd/dualmap

# Without cgo: no libc needed (distroless/static: CA certificates, tzdata,
# the nonroot user 65532).
FROM gcr.io/distroless/static-debian12:nonroot AS static
COPY --from=build-static /out/dualmap /usr/local/bin/dualmap
USER 65532:65532
EXPOSE 9002 9003 9090
ENTRYPOINT ["/usr/local/bin/dualmap"]
CMD ["serve", "-config=/etc/dualmap/config/dualmap.yaml"]

# Default: with real tokenizers (libtokenizers links glibc and libgcc:
# distroless/cc).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/dualmap /usr/local/bin/dualmap
USER 65532:65532
EXPOSE 9002 9003 9090
ENTRYPOINT ["/usr/local/bin/dualmap"]
CMD ["serve", "-config=/etc/dualmap/config/dualmap.yaml"]
