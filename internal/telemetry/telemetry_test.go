package telemetry

import (
	"context"
	"strings"
	"testing"

	"github.com/dualmap/dualmap/internal/config"
)

func envOf(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestSetup(t *testing.T) {
	tests := []struct {
		name     string
		cfg      config.Tracing
		env      map[string]string
		on       bool
		endpoint string
		protocol string
		err      string
	}{
		{name: "nothing configured", on: false},
		{name: "env endpoint, default http", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
			on: true, endpoint: "http://127.0.0.1:4318/v1/traces", protocol: "http/protobuf"},
		{name: "env grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			on: true, endpoint: "http://127.0.0.1:4317", protocol: "grpc"},
		{name: "traces endpoint is the full URL", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:4318/custom"},
			on: true, endpoint: "http://h:4318/custom", protocol: "http/protobuf"},
		{name: "config wins", cfg: config.Tracing{Endpoint: "http://c:4317", Protocol: "grpc"},
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://e:4318"}, on: true, endpoint: "http://c:4317", protocol: "grpc"},
		{name: "config disabled", cfg: config.Tracing{Disabled: true}, env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://e:4318"}},
		{name: "sdk disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://e:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://e:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "exporter zipkin", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://e:4318", "OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "bad protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://e:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "protocol"},
		{name: "bad endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "e:4318"}, err: "endpoint"},
		{name: "bad sampler arg", cfg: config.Tracing{Endpoint: "http://c:4318", Sampler: "traceidratio", SamplerArg: "2"}, err: "ratio"},
		{name: "sampler", cfg: config.Tracing{Endpoint: "http://c:4318", Sampler: "traceidratio", SamplerArg: "0.5", ServiceName: "r1",
			Headers: map[string]string{"authorization": "Bearer x"}}, on: true, endpoint: "http://c:4318/v1/traces", protocol: "http/protobuf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Setup(context.Background(), "svc", tt.cfg, envOf(tt.env))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Setup() error = %v, want one naming %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			if p.Enabled() != tt.on || (p.Tracer() != nil) != tt.on {
				t.Fatalf("Enabled() = %v, Tracer() nil = %v; want on = %v", p.Enabled(), p.Tracer() == nil, tt.on)
			}
			if p.Endpoint != tt.endpoint || p.Protocol != tt.protocol {
				t.Errorf("endpoint %q protocol %q, want %q %q", p.Endpoint, p.Protocol, tt.endpoint, tt.protocol)
			}
		})
	}
}

func TestMergeHeaders(t *testing.T) {
	h := mergeHeaders(envOf(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=x%20y,bad"}), map[string]string{"a": "2"})
	if len(h) != 2 || h["a"] != "2" || h["b"] != "x y" {
		t.Errorf("mergeHeaders() = %v", h)
	}
}
