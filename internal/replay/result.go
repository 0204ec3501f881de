package replay

import "time"

// Result is the outcome of one replayed request.
type Result struct {
	// Index is the request's position among the replayed requests (the
	// first Options.Requests of the trace, in arrival order).
	Index int
	// Sent is when the request was sent, since Run started; Delay is how
	// much later than its scheduled arrival that was (waiting for a
	// concurrency slot, or scheduling jitter).
	Sent, Delay time.Duration
	// Delayed says whether the request waited for a concurrency slot: it
	// found none free, or it arrived while an earlier request was waiting
	// for one.
	Delayed bool
	// Status is the HTTP status code, 0 if no response arrived.
	Status int
	// Err is empty for a successful request. Otherwise it is the first 200
	// bytes of an error response's body (its status line if the body is
	// empty), an error the server reported inside a 2xx response,
	// "cancelled" if Run's context ended first, "timeout after D" if
	// Options.Timeout did, or the transport error.
	Err string
	// TTFT is the time from sending the request to the first streamed
	// event carrying generated text; it equals E2E for non-streaming
	// requests and for streams that carried no text. E2E is the time from
	// sending the request to the end of its response (or to its failure).
	TTFT, E2E time.Duration
	// InputTokens is the length of the prompt sent, in tokens of
	// BytesPerToken bytes; MaxTokens is the max_tokens asked for.
	InputTokens, MaxTokens int
	// Usage says whether the server reported token usage, which then fills
	// PromptTokens, CachedTokens (prompt_tokens_details.cached_tokens) and
	// CompletionTokens.
	Usage                                        bool
	PromptTokens, CachedTokens, CompletionTokens int
	// Instance is the serving instance named by the response header
	// x-dualmap-instance (set by the router) or else x-engine-name.
	Instance string
}

// OK reports whether the request succeeded: a 2xx status and no error.
func (r Result) OK() bool { return r.Err == "" && r.Status >= 200 && r.Status < 300 }
