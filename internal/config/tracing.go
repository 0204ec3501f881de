package config

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Tracing overrides the standard OTEL_* environment variables for
// OpenTelemetry trace export (README "Tracing"). Every key left empty keeps
// what the environment says; tracing is on when an OTLP endpoint is set
// here or in OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.
type Tracing struct {
	// Disabled turns tracing off whatever the environment says.
	Disabled bool `yaml:"disabled"`
	// Endpoint is the OTLP base URL, as OTEL_EXPORTER_OTLP_ENDPOINT
	// (http://host:4317 for grpc, http://host:4318 for http/protobuf;
	// https:// uses TLS).
	Endpoint string `yaml:"endpoint"`
	// Protocol is "grpc" or "http/protobuf" (OTEL_EXPORTER_OTLP_PROTOCOL;
	// default http/protobuf).
	Protocol string `yaml:"protocol"`
	// Headers are sent with every export (OTEL_EXPORTER_OTLP_HEADERS).
	Headers map[string]string `yaml:"headers"`
	// ServiceName is the service.name resource attribute
	// (OTEL_SERVICE_NAME; default dualmap).
	ServiceName string `yaml:"service_name"`
	// Sampler and SamplerArg are OTEL_TRACES_SAMPLER and
	// OTEL_TRACES_SAMPLER_ARG: always_on, always_off, traceidratio,
	// parentbased_always_on (default), parentbased_always_off,
	// parentbased_traceidratio; the arg is the ratio in [0, 1].
	Sampler    string `yaml:"sampler"`
	SamplerArg string `yaml:"sampler_arg"`
}

// Samplers are the accepted tracing.sampler values.
var Samplers = []string{"always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"}

func (t Tracing) validate() error {
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalid("tracing.endpoint", "%q is not an http:// or https:// URL", t.Endpoint)
		}
	}
	if t.Protocol != "" && t.Protocol != "grpc" && t.Protocol != "http/protobuf" {
		return invalid("tracing.protocol", "%q is not grpc or http/protobuf", t.Protocol)
	}
	if t.Sampler != "" && !slices.Contains(Samplers, t.Sampler) {
		return invalid("tracing.sampler", "%q is not one of %s", t.Sampler, strings.Join(Samplers, ", "))
	}
	if t.SamplerArg != "" {
		if f, err := strconv.ParseFloat(t.SamplerArg, 64); err != nil || f < 0 || f > 1 {
			return invalid("tracing.sampler_arg", "%q is not a ratio in [0, 1]", t.SamplerArg)
		}
	}
	for k := range t.Headers {
		if k == "" {
			return invalid("tracing.headers", "empty header name")
		}
	}
	return nil
}
