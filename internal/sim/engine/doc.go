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
// # Engine models
//
// Profile.EngineModel selects one of two models. The realistic model
// (ModelRealistic, the default) is described first; the legacy model
// (ModelLegacy, the first one, kept for comparison) differs as noted under
// "Legacy model". With the legacy model, results are exactly those of the
// versions before the realistic model existed.
//
// # Steps
//
// The engine runs one step at a time while it has work. A step has a budget
// of MaxBatchedTokens tokens and is composed as vLLM's (v1) scheduler does:
// running requests first, oldest admission first, then new ones.
//
//  1. Each running sequence in decode takes one token of budget. One whose
//     next token starts a new KV block gets a block first (see Memory).
//  2. The prefill chunks of running requests still in prefill, in admission
//     order, each as large as the remaining budget allows; a chunk needs
//     the blocks for its tokens first.
//  3. If nothing was preempted in this step, requests from the waiting
//     queue, in FCFS order without skipping, while budget remains, fewer
//     than MaxNumSeqs sequences run, and the blocks for the request's
//     cache hit and first chunk are free; the first request that does not
//     fit stops admission for this step.
//
// The step's composition is fixed when it starts; requests submitted during
// a step wait for the next one. A step with d decoding sequences whose
// contexts (prompt plus tokens generated, including the one being decoded)
// sum to C, prefill chunks c_i of requests with prefill cost factors f_i,
// and DRAM-tier hits of h tokens (of requests admitted in the step) lasts
//
//	DecodeStepBase + DecodePerSeq*d + DecodePerContextToken*C
//	  + PrefillPerToken * Σ f_i*c_i
//	  + PrefillQuadratic * Σ c_i*(context at the end of chunk i)
//	  + DRAMLoadPerToken*h
//
// where the context at the end of a chunk counts the request's cached
// tokens, its earlier chunks and the chunk itself. The factor f_i is 1
// unless PrefillNoise > 0: then it is drawn once per request (log-normal,
// mean 1, relative standard deviation PrefillNoise) from NoiseSeed and the
// request's ID, so a router's cost estimate is no longer exactly the
// engine's cost, and the same request costs the same on every instance.
//
// When a request's last prefill chunk ends, its first token is out:
// FirstToken is the step's end time and a FirstToken event is emitted. It
// then decodes one token per step for Output-1 more steps and completes at
// the end of the last one (Done, Completed event). A request with Output 1
// completes at the end of its last prefill step, with both events. As vLLM
// stops a request at max_model_len tokens, Submit lowers Output to
// MaxModelLen-Tokens (at least 1) and sets OutputCapped.
//
// # Memory
//
// Accelerator memory holds HBMCacheBytes/KVBytesPerToken tokens of KV, in
// blocks of BlockSize tokens, shared by running requests and the prefix
// cache as with vLLM's automatic prefix caching (its KV cache manager and
// block pool). A running request holds ceil(context/BlockSize) blocks: the
// blocks of its prefix-cache hit, shared with every other running request
// holding them, and its own blocks for the tokens it computes and
// generates, taken as its prefill chunks and decode tokens need them. When
// its prefill completes, its prompt blocks get their hashes (Request.Blocks)
// and become shareable; if another running request already holds the same
// block, the two share it. Blocks no running request holds but that carry
// a hash are free cached blocks: they count as free, and allocation evicts
// the least recent of them once no empty block is left (vLLM's free block
// queue takes either from its head; we take empty blocks first, which
// keeps slightly more cache). A finished or preempted request's blocks
// become free cached blocks, deepest first, so a prefix's first block is
// the most recent and eviction takes the deepest blocks of a prefix first.
//
// Block shortages are handled as in vLLM's default (preemption by
// recompute): when a running request cannot get the blocks for its next
// decode token or prefill chunk, the newest running request (the one
// admitted last, possibly itself) is preempted until enough blocks are
// free. A preempted request frees all its blocks (its hashed ones stay in
// the cache as free cached blocks and may be hit again), goes back to the
// front of the waiting queue, and when readmitted prefills its prompt and
// the output generated so far again, minus its new prefix-cache hit (which
// covers prompt blocks only: generated tokens have no hashes here); its
// first token is not emitted again, and the prefill's end produces the next
// token, after which it decodes as before. Preemptions, RecomputedTokens
// (the tokens prefilled again) and Request.Preemptions count them. New
// rejects profiles whose HBM cannot hold one MaxModelLen request, so the
// oldest running request can always progress.
//
// The optional host-memory tier (DRAM) holds blocks evicted from HBM, most
// recent first; its overflow is dropped. A hit on a DRAM block at admission
// loads it back into an HBM block (it needs a free block like any other)
// and costs DRAMLoadPerToken per token. CacheUsage is vLLM's
// kv_cache_usage_perc: held blocks over HBM blocks.
//
// A request's cache hit is decided when it is admitted (its prefill starts),
// not when it was routed or submitted: the longest run of its leading
// blocks present in either tier, and CachedTokens = min(hit blocks x
// BlockSize, tokens to prefill - 1), since at least one token is always
// computed. Prompts longer than MaxModelLen are truncated at submission
// (Truncated).
//
// # Legacy model
//
// Running requests hold no memory and are never preempted; the cache is
// the same two-tier LRU of block hashes but holds only cached blocks (all
// of HBMCacheBytes), touched at admission and inserted when a prefill
// completes; blocks in use are not pinned (a hit counted at admission
// stands even if its blocks are evicted during the prefill). A step lasts
// DecodeStepBase + DecodePerSeq*d + PrefillPerToken*p + the quadratic and
// DRAM terms above (no context term, no noise), and Output is not capped.
// The profile's "legacy" values (LegacyValues) replace its top-level ones.
//
// # Cost
//
// A step costs O(prefill requests touched + requests admitted + requests
// finishing + decoding requests needing a block) plus one map operation per
// cache block of admitted, prefilled, preempted and finished requests:
// decoding requests sit in min-heaps keyed by the step at which they finish
// and the step at which they need their next block (one in BlockSize
// steps), and the context sum is kept incrementally, so long decode batches
// cost nothing per step. Preempted requests' heap entries are left behind
// and skipped. The caches are slice-backed intrusive LRUs that do not
// allocate once warm.
package engine
