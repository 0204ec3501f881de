package scheduler

import "time"

// KV room: a request is not dispatched to an engine whose KV memory, as it
// last reported it, cannot take the request's prompt (our rule, not the
// paper's). Engines differ in what they do then: vLLM preempts running
// requests and recomputes them later, llm-d's simulator fails the new
// request at once (500, "the kv cache does not have sufficient capacity").
// Either way the request is better held in the router queue, where it can
// still be ordered or moved, until a report shows room.
//
// An engine reports its KV memory in use as a fraction (vLLM's
// kv_cache_usage_perc) and its size (vLLM's cache_config_info,
// num_gpu_blocks x block_size: EngineLoad.KVCapacity); the rule acts only
// on engines that report both. Room is the size less the memory in use at
// the report, less the prompt tokens this replica dispatched there since
// and plus those of its requests completed since (kvTokens' change since
// the report, scaled as queueLeft scales its counts with several
// replicas). A request fits when its whole prompt does: cached blocks held
// by no running request need room too, and blocks shared with a running
// one make the rule hold a request that would fit, until the next report
// (a poll interval, 1 s by default) or a completion. A prompt larger than
// the whole memory is never held (the engine answers it with its own
// error), and neither is a request on a report older than kvRoomStale.

// kvRoomStale is the age past which an engine's KV report holds nothing:
// a poller that stopped must not hold requests until they time out.
const kvRoomStale = 5 * time.Second

// kvReport is the KV part of an engine report, for kvRoom. Guarded by
// the instance's mu.
type kvReport struct {
	capacity int           // tokens (0: not reported)
	used     int           // tokens in use at the report
	base     int           // kvTokens at the report
	at       time.Duration // when it came
}

// reportKV records the KV part of an engine report l, received at now.
// The caller holds in.mu.
func (in *instance) reportKV(now time.Duration, l EngineLoad) {
	if l.KVCapacity <= 0 {
		in.kvRep = kvReport{}
		return
	}
	in.kvRep = kvReport{
		capacity: l.KVCapacity,
		used:     int(l.KVUsage * float64(l.KVCapacity)),
		base:     in.kvTokens.get(),
		at:       now,
	}
}

// kvRoom reports whether r's prompt fits in's KV memory as its engine
// last reported it. The caller holds in.mu.
func (s *Scheduler) kvRoom(in *instance, r *Request, now time.Duration) bool {
	k := in.kvRep
	if k.capacity == 0 || r.Tokens > k.capacity || now-k.at > kvRoomStale {
		return true
	}
	since := in.kvTokens.get() - k.base
	if n := int(s.replicas.Load()); n > 1 {
		since *= n
	}
	return k.used+since+r.Tokens <= k.capacity
}
