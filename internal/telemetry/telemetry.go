// Package telemetry sets up OpenTelemetry tracing for the router and the
// simulated engine: an OTLP exporter (gRPC or HTTP) configured by the
// standard OTEL_* environment variables, each overridable by the config
// file's tracing section, and the W3C trace-context and baggage
// propagator. When no OTLP endpoint is configured tracing is off: Setup
// returns a Provider whose Tracer is nil, and nothing runs in the
// background.
package telemetry

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/dualmap/dualmap/internal/config"
)

// Provider is the tracing set up for one process.
type Provider struct {
	tp     *sdktrace.TracerProvider // nil when off
	tracer trace.Tracer
	// Endpoint and Protocol are where spans go ("" when off).
	Endpoint, Protocol string
}

// Propagator is the W3C trace context and baggage propagator the router
// extracts from client requests and injects into upstream ones.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Off is a Provider with tracing off.
func Off() *Provider { return &Provider{} }

// Tracer returns the named tracer, or nil when tracing is off.
func (p *Provider) Tracer() trace.Tracer {
	if p == nil || p.tp == nil {
		return nil
	}
	return p.tracer
}

// Enabled reports whether spans are exported.
func (p *Provider) Enabled() bool { return p != nil && p.tp != nil }

// Shutdown flushes the spans still buffered and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.tp == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// TracerProvider returns the SDK provider (nil when off), for tests that
// add span processors.
func (p *Provider) TracerProvider() *sdktrace.TracerProvider { return p.tp }

// Setup builds the Provider of a process named service (the default
// service.name) from the environment (getenv; nil = the exporters' own
// reading of os.Getenv, which they do anyway) and cfg, whose non-empty keys
// win. Tracing is on when an OTLP endpoint is set in cfg or in
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT, and
// neither cfg.Disabled, OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none
// says otherwise.
func Setup(ctx context.Context, service string, cfg config.Tracing, getenv func(string) string) (*Provider, error) {
	env := func(k string) string {
		if getenv == nil {
			return ""
		}
		return strings.TrimSpace(getenv(k))
	}
	if cfg.Disabled || strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") || env("OTEL_TRACES_EXPORTER") == "none" {
		return Off(), nil
	}
	if e := env("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q: only otlp and none are supported", e)
	}
	endpoint := cfg.Endpoint
	signalURL := false // the endpoint is the full traces URL (the _TRACES_ variable)
	if endpoint == "" {
		if endpoint = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); endpoint != "" {
			signalURL = true
		} else {
			endpoint = env("OTEL_EXPORTER_OTLP_ENDPOINT")
		}
	}
	if endpoint == "" {
		return Off(), nil
	}
	protocol := cmp.Or(cfg.Protocol, env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), env("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("telemetry: OTLP endpoint %q is not an http:// or https:// URL", endpoint)
	}
	var client otlptrace.Client
	switch protocol {
	case "grpc":
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(endpoint)}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(mergeHeaders(env, cfg.Headers)))
		}
		client = otlptracegrpc.NewClient(opts...)
	case "http/protobuf":
		if !signalURL {
			// A base URL, as OTEL_EXPORTER_OTLP_ENDPOINT: the signal's path follows.
			v := *u
			v.Path = strings.TrimSuffix(v.Path, "/") + "/v1/traces"
			endpoint = v.String()
		}
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(mergeHeaders(env, cfg.Headers)))
		}
		client = otlptracehttp.NewClient(opts...)
	default:
		return nil, fmt.Errorf("telemetry: OTLP protocol %q is not grpc or http/protobuf", protocol)
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	if cfg.ServiceName != "" {
		res, _ = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", cfg.ServiceName)))
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if cfg.Sampler != "" || cfg.SamplerArg != "" {
		s, err := sampler(cmp.Or(cfg.Sampler, env("OTEL_TRACES_SAMPLER"), "parentbased_always_on"), cmp.Or(cfg.SamplerArg, env("OTEL_TRACES_SAMPLER_ARG")))
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdktrace.WithSampler(s))
	} // else the SDK reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG itself
	tp := sdktrace.NewTracerProvider(opts...)
	return &Provider{tp: tp, tracer: tp.Tracer("github.com/dualmap/dualmap"), Endpoint: endpoint, Protocol: protocol}, nil
}

// mergeHeaders is OTEL_EXPORTER_OTLP_HEADERS with the config's headers on
// top: an exporter given headers does not read the variable itself.
func mergeHeaders(env func(string) string, cfg map[string]string) map[string]string {
	h := map[string]string{}
	for _, kv := range strings.Split(cmp.Or(env("OTEL_EXPORTER_OTLP_TRACES_HEADERS"), env("OTEL_EXPORTER_OTLP_HEADERS")), ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if dv, err := url.QueryUnescape(strings.TrimSpace(v)); err == nil && k != "" {
			h[k] = dv
		}
	}
	maps.Copy(h, cfg)
	return h
}

// sampler is the sampler the OTEL_TRACES_SAMPLER name and arg describe.
func sampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := 1.0
	if arg != "" {
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || f < 0 || f > 1 {
			return nil, fmt.Errorf("telemetry: sampler arg %q is not a ratio in [0, 1]", arg)
		}
		ratio = f
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, fmt.Errorf("telemetry: sampler %q is not one of %s", name, strings.Join(config.Samplers, ", "))
}
