// Package replay is the trace-replaying load generator behind
// `dualmap replay`: it sends the requests of a trace (package sim/trace) to
// an OpenAI-compatible endpoint, at the trace's own arrival times or
// rescaled to a target rate, and measures client-side time to first token
// (TTFT) and end-to-end latency per request.
//
// It is for putting real traffic with a trace's prefix structure in front of
// a real system (an Envoy with the DualMap router before model servers, or a
// single server) and reading what a client sees. It is not a simulator (see
// package sim), not a correctness checker of the server's output (the text
// generated is read only to time it) and not a closed-loop benchmark: the
// arrival schedule is open-loop, bounded only by Options.Concurrency.
//
// # Prompt synthesis
//
// A trace gives no text, only chained block ids: equal ids mean equal
// prefixes. Prompter maps each distinct block id to a deterministic chunk
// of ASCII text of 4 bytes per token (the byte approximation of package
// tokenize), generated from (seed, id), and a prompt is its blocks' texts
// concatenated, cut to 4 bytes per input token. So requests sharing leading
// block ids share a leading text of exactly those blocks, and the system
// under test sees the trace's prefix structure.
//
// Each prompt is sent as one user message of a chat completion (or as the
// prompt of a completion): a single message keeps the mapping from trace
// blocks to prompt text exact, since the server's chat template then adds
// the same fixed text before every prompt and nothing between blocks.
//
// # Measurement
//
// TTFT runs from just before the request is sent to the first server-sent
// event carrying generated text; for non-streaming requests it equals the
// end-to-end latency. Token usage and the prefix-cache hit (cached_tokens)
// are read from the usage the server reports, if any.
//
// Run starts one goroutine per request in flight and, with a progress
// writer, one for the progress line; all of them end before Run returns.
package replay
