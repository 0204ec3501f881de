# dualmap build, test and benchmark entry points. See README.md.
GO      ?= go
BIN     := bin/dualmap
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build test unit bench lint run clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/dualmap

# test: everything CI runs. Lint first, then the unit tests with the race detector.
test: lint unit

unit:
	$(GO) test -race -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench=. -benchmem ./scheduler/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

run: build
	@echo "make run will start Envoy on localhost:8080, 4 simulated engines and 'dualmap serve'."
	@echo "Not built yet: the ext_proc server and the Envoy configs are tracked in their own issues."
	@echo "What works today: ./$(BIN) version, and the scheduler library (make test, make bench)."
	@exit 1

clean:
	rm -rf bin

# Real Hugging Face tokenizers (package tokenize, build tag "tokenizers") link
# libtokenizers.a, built by scripts/libtokenizers.sh with cargo into this dir.
TOKLIB_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/dualmap/libtokenizers-1.22.1/target/release

.PHONY: libtokenizers test-tokenizers

libtokenizers:
	bash scripts/libtokenizers.sh

test-tokenizers: libtokenizers
	CGO_ENABLED=1 CGO_LDFLAGS="-L$(TOKLIB_DIR)" $(GO) test -tags tokenizers -race -count=1 ./tokenize/
