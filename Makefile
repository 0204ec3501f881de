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
