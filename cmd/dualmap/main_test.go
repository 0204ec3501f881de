package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{name: "no args", args: nil, wantCode: 2, wantErr: "usage: dualmap"},
		{name: "help", args: []string{"help"}, wantCode: 0, wantErr: "commands:"},
		{name: "unknown", args: []string{"frobnicate"}, wantCode: 2, wantErr: `unknown command "frobnicate"`},
		{name: "version", args: []string{"version"}, wantCode: 0, wantOut: "dualmap dev"},
		{name: "version extra arg", args: []string{"version", "x"}, wantCode: 2, wantErr: "takes no arguments"},
		{name: "pd-sidecar without addresses", args: []string{"pd-sidecar", "--listen", "127.0.0.1:0"}, wantCode: 2, wantErr: "--decode ADDR are required"},
		{name: "pd-sidecar bad decode", args: []string{"pd-sidecar", "--listen", "127.0.0.1:0", "--decode", "nohost"}, wantCode: 2, wantErr: "must be host:port"},
		{name: "pd-sidecar bad bound", args: []string{"pd-sidecar", "--listen", "127.0.0.1:0", "--decode", "127.0.0.1:1", "--max-body-bytes", "0"}, wantCode: 2, wantErr: "must be positive"},
		{name: "pd-sidecar help", args: []string{"pd-sidecar", "-h"}, wantCode: 0, wantErr: "x-prefiller-host-port"},
		{name: "engine bad transfer cost", args: []string{"engine", "--listen", "127.0.0.1:0", "--kv-transfer-per-token", "+Inf"}, wantCode: 2, wantErr: "KVTransferPerToken must be finite"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tt.args, &out, &errOut)
			if code != tt.wantCode {
				t.Errorf("run(%q) = %d, want %d (stderr %q)", tt.args, code, tt.wantCode, errOut.String())
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("stdout = %q, want it to contain %q", out.String(), tt.wantOut)
			}
			if !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut.String(), tt.wantErr)
			}
		})
	}
}

func TestServeNeedsConfig(t *testing.T) {
	var out, errOut strings.Builder
	if code := run([]string{"serve"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--config FILE is required") {
		t.Errorf("serve without config = %d %q", code, errOut.String())
	}
}

func TestConfigCommand(t *testing.T) {
	tlsMissing := filepath.Join(t.TempDir(), "tls.yaml")
	if err := os.WriteFile(tlsMissing, []byte("grpc: {tls: {cert_file: /nonexistent/tls.crt, key_file: /nonexistent/tls.key}}\npools: [{instances: [{address: 127.0.0.1:8001}]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"check example", []string{"config", "check", "../../examples/dualmap.yaml"}, 0, "ok (2 pools, 6 static instances, 0 pools from xds)", ""},
		{"check xds example", []string{"config", "check", "../../examples/dualmap-xds.yaml"}, 0, "ok (1 pools, 0 static instances, 1 pools from xds)", ""},
		{"check missing", []string{"config", "check", "/nonexistent.yaml"}, 1, "", "no such file"},
		{"check envoy routes", []string{"config", "check", "../../examples/dualmap.yaml", "../../envoy/front-proxy.yaml", "../../envoy/sidecar.yaml"}, 0, "front-proxy.yaml: ok (8 dualmap route settings)", ""},
		{"check envoy routes, missing pool", []string{"config", "check", "../../examples/dualmap-xds.yaml", "../../envoy/front-proxy-xds.yaml"}, 1, "", `pool = "batch": no such pool`},
		{"check gateway example", []string{"config", "check", "../../examples/gateway-epp.yaml"}, 0, "gateway-epp.yaml: ok (1 pools, 4 static instances, 0 pools from xds)", ""},
		{"check TLS files", []string{"config", "check", tlsMissing}, 1, "", "grpc.tls.cert_file: stat /nonexistent/tls.crt: no such file"},
		{"defaults", []string{"config", "defaults"}, 0, "x-gateway-destination-endpoint", ""},
		{"no sub", []string{"config"}, 2, "", "check or defaults"},
		{"bad sub", []string{"config", "lint"}, 2, "", "unknown config command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(tt.args, &out, &errOut); code != tt.wantCode || !strings.Contains(out.String(), tt.wantOut) || !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("run(%q) = %d, stdout %q, stderr %q", tt.args, code, out.String(), errOut.String())
			}
		})
	}
}
