// Package engine is a deterministic model of one LLM serving instance,
// modelled on vLLM with automatic prefix caching and chunked prefill. The
// cluster simulator drives one Engine per instance; a simulated model server
// can drive one in front of real clients.
//
// It has no goroutines and no wall clock: every call takes the current time
// as float64 seconds from the caller, and the same calls give the same
// results. It is not safe for concurrent use.
//
// # Driving an engine
//
// Submit puts a request in the FCFS waiting queue. NextTime says when the
// engine next needs the caller: the end of the step in progress, or, when a
// request is waiting on an idle engine, the time the next step starts.
// Advance(now) runs the engine up to now: it finishes every step ending at or
// before now, starts the steps that follow, and appends the FirstToken and
// Completed events of the finished steps in time order. A step ending after
// now stays in progress. Times passed to Submit and Advance must not go
// backwards; a step never starts before the previous one ended nor before
// the first waiting request was submitted.
//
// # Steps
//
// The engine runs one step at a time while it has work. A step has a budget
// of MaxBatchedTokens tokens. Each running sequence in decode takes one token
// of budget. The rest goes to the prefill chunks of running requests still in
// prefill, in admission (FCFS) order, and then to requests admitted from the
// waiting queue, in FCFS order without skipping, while budget remains and
// fewer than MaxNumSeqs sequences run. The step's composition is fixed when
// it starts; requests submitted during a step wait for the next one.
//
// A step of d decoding sequences, p prefill tokens and DRAM-tier hits of h
// tokens (of requests admitted in the step) lasts
//
//	DecodeStepBase + DecodePerSeq*d + PrefillPerToken*p
//	  + PrefillQuadratic * Σ chunk*(context at the end of the chunk)
//	  + DRAMLoadPerToken*h
//
// where the sum runs over the step's prefill chunks and the context at the
// end of a chunk counts the request's cached tokens, its earlier chunks and
// the chunk itself. A step with only prefill still pays DecodeStepBase.
//
// When a request's last prefill chunk ends, its first token is out:
// FirstToken is the step's end time and a FirstToken event is emitted. It
// then decodes one token per step for Output-1 more steps and completes at
// the end of the last one (Done, Completed event). A request with Output 1
// completes at the end of its last prefill step, with both events.
//
// # Prefix cache
//
// The KV cache is a two-tier LRU of blocks of BlockSize tokens, keyed by
// chained block hashes (Request.Blocks): accelerator memory (HBM) and an
// optional host-memory tier (DRAM). Blocks evicted from HBM move to DRAM,
// blocks evicted from DRAM are dropped, and a DRAM hit moves its block back
// to HBM. Together the tiers form one LRU order, HBM holding the most recent
// blocks.
//
// A request's cache hit is decided when it is admitted (its prefill starts),
// not when it was routed or submitted: it is the longest run of its leading
// blocks present in either tier, and CachedTokens = min(hit blocks x
// BlockSize, Tokens-1), since at least one token is always computed. The hit
// blocks are touched at admission. When the request's prefill completes, all
// of its blocks are inserted as most recent. Blocks are always touched
// deepest first, so a block is never more recent than its parent and the
// cache stays prefix-closed: eviction takes the deepest blocks of a prefix
// first. Blocks in use are not pinned: a hit counted at admission stands even
// if its blocks are evicted while the request is prefilling.
//
// Prompts longer than MaxModelLen are truncated at submission (Truncated).
//
// # Cost
//
// A step costs O(prefill requests touched + requests admitted + requests
// finishing) plus one map operation per cache block of admitted and
// prefilled requests: decoding requests sit in a min-heap keyed by the step
// at which they finish, so long decode batches cost nothing per step. The
// cache is a slice-backed intrusive LRU that does not allocate once full.
package engine
