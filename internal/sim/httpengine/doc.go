// Package httpengine is a simulated OpenAI-compatible model server: an HTTP
// front end to one sim/engine model of a vLLM instance, for demos and
// end-to-end tests of the router (Envoy + ext_proc) on machines without
// accelerators.
//
// From the outside it behaves like a vLLM server: the same endpoints
// (POST /v1/chat/completions and /v1/completions, GET /v1/models, /health
// and /metrics), the same streaming format (server-sent events ending with
// "data: [DONE]"), the same metric names (vllm:...), timing taken from an
// engine profile, and a real prefix cache keyed by the block hashes the
// router computes (package tokenize, byte encoder, same block size), so the
// router's cache estimate and the engine's cache agree. It also takes
// faults for tests: an error rate, added latency, a "down" health flag,
// inference refused at the connection level while health still answers
// (POST /admin/fault, Server.SetFaults) and reset connections
// (Server.SetRefuse); the connection faults need Server.Listener. Every
// response names the engine (x-engine-name) and repeats the destination a
// router chose for the request (x-engine-destination), so tests can tell
// who served a request from who was meant to.
//
// It is not a model: the output is synthetic ("token0 token1 ..."), one
// word per output token, deterministic given the request. It is not a
// performance test of anything but the router: the engine's timing is the
// profile's, not this process's.
//
// # Time
//
// One goroutine, Run, owns the engine (which is not safe for concurrent
// use). Simulated time is TimeScale x the wall time since Run started, so
// TimeScale 10 runs ten times faster than the profile. Handlers submit
// requests to Run over a channel; Run sleeps until the engine's next step
// ends (in wall time) or a request arrives, advances the engine one step at
// a time, and tells each request's handler about its first token, each
// decoded token (the engine decodes one token per running sequence per
// step) and its completion. A streaming response sends its headers when the
// first token is out and one chunk per token as the steps finish. A client
// that goes away does not take its request out of the engine: the engine
// finishes it and the notices are dropped.
//
// The files, one job each: options.go (Options and defaults), server.go
// (Server, routing, snapshot), clock.go (wall and simulated time),
// loop.go (Run), ticket.go (what Run tells a handler), infer.go (the
// inference endpoints), reply.go (response and chunk bodies), stream.go
// (server-sent events), text.go (the synthetic output), faults.go (fault
// injection and /admin/fault), listener.go (the listener and connections
// the connection faults act on), endpoints.go (/health, /v1/models),
// metrics.go (/metrics), pd.go (the prefill and decode legs of a
// disaggregated request: kv_transfer_params).
package httpengine
