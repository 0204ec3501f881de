// Package kvevents reads the KV-cache events model servers publish over
// ZeroMQ (vLLM, SGLang, TensorRT-LLM, llm-d's simulator) and turns them
// into the router's own block keys.
//
// It has four parts: a bounded MessagePack reader and the event decoder
// (msgpack.go, decode.go: every encoding the engines have used, tolerant
// of unknown keys, trailing fields and unknown event types); the tracker
// (tracker.go: per instance and data-parallel rank, the engine's block
// hash -> the router's chained hash of the token ids the event carries,
// so that BlockRemoved can be applied); the subscriber (subscriber.go:
// ZMQ SUB in connect or bind mode, sequence tracking, replay after a
// gap, purge after a restart, over its own bounded ZMTP 3 client,
// zmtp.go); and a publisher (publisher.go, over go-zeromq/zmq4) that the
// test engine uses to publish vLLM-format events of its own.
//
// It is not a place for routing decisions: what it learns goes to a
// Target (the pool), which owns the scheduler's cache index.
package kvevents
