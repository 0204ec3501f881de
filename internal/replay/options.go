package replay

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"
	"time"
)

// Defaults of Options fields left zero.
const (
	DefaultModel       = "dualmap-sim"
	DefaultConcurrency = 256
	DefaultMaxOutput   = 256
	DefaultTimeout     = 120 * time.Second
)

// Endpoints of Options.Endpoint.
const (
	EndpointChat        = "chat"        // POST /v1/chat/completions
	EndpointCompletions = "completions" // POST /v1/completions
)

// ErrInvalidOptions is wrapped by Run's errors about Options.
var ErrInvalidOptions = errors.New("invalid options")

// Options control Run. Zero values take the defaults named per field.
type Options struct {
	// URL is the base URL of the server, e.g. http://127.0.0.1:8080. The
	// endpoint path is appended: /v1/chat/completions or /v1/completions,
	// without the /v1 if URL already ends with it.
	URL string
	// Endpoint is EndpointChat (default) or EndpointCompletions.
	Endpoint string
	// Model is the request's model field; default DefaultModel.
	Model string
	// QPS, if > 0, rescales the arrivals of the replayed requests to this
	// mean rate (trace.ScaleToQPS); 0 keeps the trace's own timestamps.
	QPS float64
	// Requests, if > 0, replays only the first Requests requests.
	Requests int
	// Concurrency caps the requests in flight; default DefaultConcurrency.
	// An arrival finding the cap reached waits for a slot, in arrival
	// order, and is counted in Summary.Delayed.
	Concurrency int
	// Stream asks for a streamed response (server-sent events) with usage
	// in a final chunk. The zero value sends non-streaming requests.
	Stream bool
	// MaxOutput caps max_tokens, which is otherwise the trace's output
	// length; 0 means DefaultMaxOutput and < 0 means no cap.
	MaxOutput int
	// ScaleTokens multiplies every request's input and output token counts
	// and the block size; 0 means 1. E.g. 0.1 turns a 12k-token prompt of
	// 512-token blocks into a 1.2k-token one of 51-token blocks.
	ScaleTokens float64
	// Seed selects the prompt text; equal seeds give equal prompts.
	Seed uint64
	// Timeout bounds each request, body included; default DefaultTimeout.
	Timeout time.Duration
	// Headers are added to every request (e.g. an SLO class or
	// Authorization).
	Headers map[string]string
	// IgnoreEOS adds "ignore_eos": true (a vLLM and SGLang extension) so
	// that servers generate max_tokens tokens, as the trace did.
	IgnoreEOS bool
	// Progress, if not nil, receives a one-line progress bar redrawn with
	// carriage returns, and a final newline.
	Progress io.Writer
}

// resolve returns o with defaults filled in and its target URL, or an error
// wrapping ErrInvalidOptions.
func (o Options) resolve() (Options, string, error) {
	bad := func(format string, args ...any) (Options, string, error) {
		return Options{}, "", fmt.Errorf("replay: %w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	if o.Endpoint == "" {
		o.Endpoint = EndpointChat
	}
	if o.Model == "" {
		o.Model = DefaultModel
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxOutput == 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.ScaleTokens == 0 {
		o.ScaleTokens = 1
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	switch {
	case o.Endpoint != EndpointChat && o.Endpoint != EndpointCompletions:
		return bad("Endpoint %q unknown (want %q or %q)", o.Endpoint, EndpointChat, EndpointCompletions)
	case o.QPS < 0 || math.IsNaN(o.QPS) || math.IsInf(o.QPS, 0):
		return bad("QPS must be a finite number >= 0, got %v", o.QPS)
	case o.Requests < 0:
		return bad("Requests must be >= 0, got %d", o.Requests)
	case o.Concurrency < 0:
		return bad("Concurrency must be >= 1, got %d", o.Concurrency)
	case !(o.ScaleTokens > 0) || math.IsInf(o.ScaleTokens, 0):
		return bad("ScaleTokens must be a finite number > 0, got %v", o.ScaleTokens)
	case o.Timeout < 0:
		return bad("Timeout must be >= 0, got %v", o.Timeout)
	}
	target, err := endpointURL(o.URL, o.Endpoint)
	if err != nil {
		return bad("%v", err)
	}
	return o, target, nil
}

// endpointURL appends the endpoint's path to base.
func endpointURL(base, endpoint string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("URL %q: want http:// or https://host[:port][/path]", base)
	}
	path := strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(path, "/v1") {
		path += "/v1"
	}
	if endpoint == EndpointChat {
		path += "/chat/completions"
	} else {
		path += "/completions"
	}
	u.Path, u.RawPath = path, ""
	return u.String(), nil
}
