# dualmap build, test and benchmark entry points. See README.md.
GO      ?= go
BIN     := bin/dualmap
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build build-tokenizers test unit scripts-test chattmpl-test chart image image-oci image-test bench bench-e2e bench-peer bench-kvevents soak lint run demo e2e e2e-gateways e2e-pd e2e-kvevents envoy-gateway clean jaeger llama bench-real

all: build

# build: zero setup (no cgo needed); prompts are measured with the byte
# approximation unless a pool names a tokenizer file, which needs
# build-tokenizers.
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/dualmap

# build-tokenizers: with real Hugging Face tokenizers (Rust libtokenizers.a,
# built once with cargo and cached outside the repository).
build-tokenizers: libtokenizers
	CGO_ENABLED=1 CGO_LDFLAGS="-L$(TOKLIB_DIR)" $(GO) build -tags tokenizers -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/dualmap

# test: everything CI runs. Lint, the unit tests with the race detector
# (every fuzz target's seed corpus runs there), a build without cgo, then
# the packages that use real tokenizers again with them, the Helm chart and
# the container image, then the e2e suite. chattmpl-test: the router's chat
# templates against transformers' renderer (scripts/chattmpl.sh: a cached
# virtualenv, and llama.cpp's templates from the source scripts/llama.sh
# fetches).
test: lint unit scripts-test chattmpl-test nocgo test-tokenizers chart image-test e2e

unit:
	$(GO) test -race -count=1 ./...

# scripts-test: the Python helpers' own tests (standard library only; the
# AIPerf venv of scripts/aiperf.sh is not needed).
scripts-test:
	cd scripts && PYTHONDONTWRITEBYTECODE=1 python3 -m unittest -q test_aiperf_run

chattmpl-test:
	$(GO) mod download github.com/daulet/tokenizers
	@out=$$(bash scripts/chattmpl.sh) && \
	DUALMAP_CHATTMPL_PYTHON="$$(echo "$$out" | tail -n 2 | head -n 1)" \
	DUALMAP_CHATTMPL_TEMPLATES="$$(echo "$$out" | tail -n 1)" \
	$(GO) test -count=1 -v -run 'TestMatchesTransformers' ./internal/chattmpl/

# chart: helm lint and helm template of charts/dualmap with the Helm Go
# library for every value set in charts/test/testdata/values, golden files,
# strict decoding into the Kubernetes API types, and the rendered dualmap
# config through the real loader. A module of its own (charts/test/go.mod)
# so Helm and the Kubernetes modules stay out of the router's dependencies.
# After a deliberate chart change: cd charts/test && go test -update.
# Without -race: the tests run on one goroutine, and a race build of Helm
# and the Kubernetes modules costs minutes of CI.
# The real Envoy (scripts/envoy.sh) validates the front proxy's config.
chart:
	envoy="$$(bash scripts/envoy.sh | tail -n 1)" && cd charts/test && DUALMAP_ENVOY="$$envoy" $(GO) test -count=1 ./...

nocgo:
	CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/dualmap

# image: the container image. With a Docker engine, the Dockerfile (real
# tokenizers, distroless/cc, non-root); without one, image-oci.
# image-oci: daemonless (tools/image, go-containerregistry): the router
# without cgo on an empty base as an OCI layout in bin/image/oci and a
# `docker load` tarball bin/image/dualmap.tar. image-test: its test.
IMAGE ?= ghcr.io/dualmap/dualmap:$(VERSION)
image:
	@if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then \
		set -x; docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .; \
	else \
		echo "image: no Docker engine here; building daemonless (make image-oci)"; \
		$(MAKE) --no-print-directory image-oci; \
	fi

image-oci:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/dualmap-static ./cmd/dualmap
	cd tools/image && $(GO) run . -binary ../../bin/dualmap-static -out ../../bin/image -tag $(IMAGE) -version $(VERSION)

image-test:
	cd tools/image && $(GO) test -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench=. -benchmem ./scheduler/ ./internal/extproc/

# lint: gofmt, go vet and staticcheck (installed by scripts/staticcheck.sh
# into the cache outside the repository when missing), also over the code
# behind the e2e and tokenizers build tags. Checking the tokenizers code only
# type-checks it: it needs a C compiler for cgo but not libtokenizers.a.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/
	cd charts/test && $(GO) vet ./...
	cd tools/image && $(GO) vet ./...
	@sc=$$(GO=$(GO) bash scripts/staticcheck.sh | tail -n 1) && set -x && \
	"$$sc" ./... && \
	"$$sc" -tags e2e ./e2e/ && \
	"$$sc" -tags tokenizers ./internal/tokenize/ ./internal/extproc/ && \
	(cd charts/test && "$$sc" ./...) && \
	cd tools/image && "$$sc" ./...

# jaeger: a local Jaeger v2 (built once by scripts/jaeger.sh, cached outside
# the repository) on 127.0.0.1: OTLP 4317/4318, UI 16686. `make run` in
# another terminal exports its traces to it.
jaeger:
	bash scripts/jaeger-run.sh

# run: Envoy on localhost:8080 -> dualmap -> 4 simulated engines (Ctrl-C stops).
# GATEWAY=envoy-gateway: Envoy Gateway standalone in front instead
# (examples/envoy-gateway; builds it the first time, see e2e-gateways).
run:
	ENGINE="$(ENGINE)" GATEWAY="$(GATEWAY)" bash scripts/run.sh

# demo: the conversation trace through Envoy to 4 simulated engines near
# the stack's capacity, dualmap vs round robin (and llm-d's picker when
# LLMD_SRC names an llm-d-router checkout or its binary is cached): a table
# and a chart in a temp dir (knobs at the top of scripts/demo.sh).
demo:
	GO=$(GO) LLMD_SRC="$(LLMD_SRC)" bash scripts/demo.sh

# bench-e2e: the router's added latency through a real Envoy, full-duplex
# and BUFFERED ext_proc against Envoy alone, 2 KB and 200 KB prompts (a
# report; DUALMAP_BENCH_ROUNDS, default 2).
bench-e2e:
	DUALMAP_BENCH_E2E=1 DUALMAP_ENVOY="$$(bash scripts/envoy.sh | tail -n 1)" $(GO) test -tags e2e -count=1 -v -run TestAddedLatencyReport ./e2e/

# bench-peer: dualmap and llm-d's endpoint picker side by side behind the
# same gateway-style Envoy, one and three replicas, at shares of the
# measured capacity (a report; knobs at the top of scripts/bench-peer.sh).
# LLMD_SRC: an llm-d-router checkout, whose EPP is built once into the cache
# by scripts/llmd-epp.sh; LLMD_SIM_SRC: an llm-d-inference-sim checkout,
# llm-d's vLLM simulator (scripts/llmd-sim.sh), to run on it too.
bench-peer:
	GO=$(GO) LLMD_SRC="$(LLMD_SRC)" LLMD_SIM_SRC="$(LLMD_SIM_SRC)" bash scripts/bench-peer.sh

# bench-kvevents: the conversation trace on small-cache `dualmap engine`s,
# dualmap with its predicted index against KV events, 1 and 3 replicas (a
# report; knobs in e2e/kvreport_test.go, figures in docs/evaluation.md).
bench-kvevents:
	DUALMAP_KV_REPORT=1 DUALMAP_ENVOY="$$(bash scripts/envoy.sh | tail -n 1)" $(GO) test -tags e2e -count=1 -v -timeout 60m -run TestKVEventsReport ./e2e/

# soak: the conversation trace through Envoy and three routers sharing Redis
# for DUALMAP_SOAK_DURATION (default 10m), Redis restarted twice (a report).
soak:
	DUALMAP_SOAK=1 DUALMAP_ENVOY="$$(bash scripts/envoy.sh | tail -n 1)" $(GO) test -tags e2e -count=1 -v -timeout 30m -run TestSoakReport ./e2e/

# e2e: real Envoy, routers and engines on loopback (installs Envoy if
# missing), simulated engines, real llama.cpp llama-servers (built once by
# scripts/llama.sh, about ten minutes, cached outside the repository) and a
# real Jaeger (built once by scripts/jaeger.sh, cached likewise).
e2e:
	@llama=$$(bash scripts/llama.sh) && \
	DUALMAP_LLAMA_SERVER="$$(echo "$$llama" | tail -n 2 | head -n 1)" \
	DUALMAP_LLAMA_MODEL="$$(echo "$$llama" | tail -n 1)" \
	DUALMAP_JAEGER="$$(bash scripts/jaeger.sh | tail -n 1)" \
	DUALMAP_ENVOY="$$(bash scripts/envoy.sh | tail -n 1)" $(GO) test -tags e2e -count=1 -timeout 30m -v ./e2e/

# e2e-gateways: the black-box endpoint-picker suite (TestConformance*) and
# the generated-config checks (TestGatewayConfigDump*) against Envoy Gateway
# standalone as well as our gateway bootstrap. Opt-in: the first build of
# Envoy Gateway (scripts/envoy-gateway.sh, cached outside the repository)
# takes long enough to push a fresh CI run past its budget; `make e2e` runs
# the same suite against the bootstrap and skips Envoy Gateway.
e2e-gateways:
	@eg=$$(GO=$(GO) bash scripts/envoy-gateway.sh | tail -n 1) && \
	DUALMAP_ENVOY_GATEWAY="$$eg" \
	DUALMAP_ENVOY="$$(bash scripts/envoy.sh | tail -n 1)" $(GO) test -tags e2e -count=1 -timeout 30m -v -run 'TestConformance|TestGatewayConfigDump' ./e2e/

# e2e-pd: a prefill/decode pool through llm-d's own parts: Envoy -> dualmap
# -> llm-d's P/D sidecar (cmd/pd-sidecar) in front of llm-d's vLLM simulator
# for the decode instances, the simulator alone for the prefill instances,
# then each of llm-d's with ours (dualmap pd-sidecar, dualmap engine)
# (TestPDThroughLLMDSidecar), and ours alone (TestPDPool, which make e2e
# runs too). Opt-in: llm-d's are built from its snapshots (LLMD_SRC: an
# llm-d-router checkout, LLMD_SIM_SRC: an llm-d-inference-sim checkout;
# scripts/llmd-sidecar.sh and scripts/llmd-sim.sh, cached outside the
# repository), which a fresh clone does not have.
e2e-pd:
	@side=$$(GO=$(GO) bash scripts/llmd-sidecar.sh "$(LLMD_SRC)" | tail -n 1) && \
	sim=$$(GO=$(GO) bash scripts/llmd-sim.sh "$(LLMD_SIM_SRC)" "$(LLMD_SRC)" | tail -n 1) && \
	DUALMAP_LLMD_SIDECAR="$$side" DUALMAP_LLMD_SIM="$$sim" \
	DUALMAP_ENVOY="$$(bash scripts/envoy.sh | tail -n 1)" $(GO) test -tags e2e -count=1 -timeout 20m -v -run 'TestPD' ./e2e/

# e2e-kvevents: the KV-event tests against publishers nobody here wrote:
# llm-d's vLLM simulator's live stream in both encodings (its binary from
# scripts/llmd-sim.sh: LLMD_SRC and LLMD_SIM_SRC as for e2e-pd) and SGLang's
# own publisher, its kv_events.py from the PyPI wheel over pyzmq/libzmq
# (scripts/sglang-kv.sh: a venv and the wheel, --no-deps, cached outside the
# repository), with the dualmap-engine test (TestKVEvents*). Opt-in: the
# wheel and the simulator come from outside; `make e2e` runs the
# dualmap-engine test only.
e2e-kvevents:
	@sim=$$(GO=$(GO) bash scripts/llmd-sim.sh "$(LLMD_SIM_SRC)" "$(LLMD_SRC)" | tail -n 1) && \
	sg=$$(bash scripts/sglang-kv.sh) && \
	DUALMAP_LLMD_SIM="$$sim" \
	DUALMAP_SGLANG_PY="$$(echo "$$sg" | sed -n 's/^DUALMAP_SGLANG_PY=//p')" \
	DUALMAP_SGLANG_KV_EVENTS="$$(echo "$$sg" | sed -n 's/^DUALMAP_SGLANG_KV_EVENTS=//p')" \
	DUALMAP_ENVOY="$$(bash scripts/envoy.sh | tail -n 1)" $(GO) test -tags e2e -count=1 -timeout 10m -v -run 'TestKVEvents' ./e2e/

# envoy-gateway: build Envoy Gateway's control plane (scripts/envoy-gateway.sh).
envoy-gateway:
	GO=$(GO) bash scripts/envoy-gateway.sh

# bench-real: the conversation trace through Envoy -> dualmap -> real
# llama.cpp llama-servers, per policy at a rate below and one past
# saturation (a report; see scripts/bench-real.sh for the knobs).
bench-real:
	bash scripts/bench-real.sh

# llama: build llama.cpp's llama-server and the tiny model (scripts/llama.sh).
llama:
	bash scripts/llama.sh

clean:
	rm -rf bin

# Real Hugging Face tokenizers (package tokenize, build tag "tokenizers") link
# libtokenizers.a, built by scripts/libtokenizers.sh with cargo into this dir.
TOKLIB_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/dualmap/libtokenizers-1.22.1/target/release

.PHONY: libtokenizers test-tokenizers nocgo

libtokenizers:
	bash scripts/libtokenizers.sh

test-tokenizers: libtokenizers
	CGO_ENABLED=1 CGO_LDFLAGS="-L$(TOKLIB_DIR)" $(GO) test -tags tokenizers -race -count=1 ./internal/tokenize/ ./internal/extproc/

# mutate: mutation testing (gremlins) over scheduler, extproc, state and coord, one
# worker, one package at a time; long (see docs/testing.md for times and the
# knobs: MUTATE_PKGS, MUTATE_EXCLUDE, MUTATE_DIFF=main for a branch's lines).
# fuzz: every fuzz target of the module, FUZZTIME each (default 30s);
# fuzz-short: the same at 10s each (times in docs/testing.md). Crashers
# land in the package's testdata/fuzz/.
.PHONY: mutate fuzz fuzz-short
FUZZTIME ?= 30s

mutate:
	GO=$(GO) bash scripts/mutate.sh

fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

fuzz-short:
	GO=$(GO) FUZZTIME=10s bash scripts/fuzz.sh
