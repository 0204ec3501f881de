#!/usr/bin/env bash
# Regenerates internal/proto/statepb/state.pb.go from proto/state.proto.
# Needs protoc (Debian: apt-get install -y protobuf-compiler) and
# protoc-gen-go v1.36.12 on PATH
# (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12).
set -euo pipefail
cd "$(dirname "$0")/.."
PATH="$PATH:$(go env GOPATH)/bin"
protoc --proto_path=proto --go_out=internal/proto/statepb --go_opt=paths=source_relative proto/state.proto
