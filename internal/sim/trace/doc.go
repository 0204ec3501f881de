// Package trace reads, writes, transforms and generates request traces for
// the LLM-serving cluster simulator.
//
// A Trace is a list of Requests sorted by arrival, the first one arriving at
// 0. Each request carries its prompt as chained block hashes: Blocks[j]
// stands for the j-th block of BlockSize tokens and its value identifies the
// whole prefix Blocks[0..j], so equal values mean equal prefixes and a
// prefix cache can be modelled as a set of block values.
//
// # Formats
//
// Read and ReadFile take JSON Lines, one request per line such as
//
//	{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}
//
// in one of two formats:
//
//   - FormatMooncake (the default) is the format of the Mooncake FAST'25
//     traces: timestamp is a JSON number of milliseconds, hash_ids are
//     already chained and len(hash_ids) == ceil(input_length / BlockSize).
//   - FormatGeneric has the same fields but is looser: the timestamp may be
//     a number or a string holding a number, in Options.TimeUnit; the number
//     of hash ids is not checked against input_length; and with
//     Options.ChainIDs the ids are per-block content ids that the reader
//     chains itself (see chainIDs in hash.go).
//
// Lines may be long (up to Options.MaxLineBytes, 64 MiB by default).
//
// Write produces the Mooncake format, so Read(Write(t)) reproduces t.
//
// # Transformations
//
// ScaleToQPS rescales arrivals to a target mean rate, Head truncates,
// Replicate makes k copies with disjoint block ids (more load for more
// instances) and Stats summarises a trace, including the prefix-reuse upper
// bound of an infinite cache.
//
// # Generator
//
// The Mooncake tool&agent trace is not available, so Generate synthesises a
// skewed tool&agent-like workload. Its output is labelled: Trace.Source
// starts with "generated:" (GeneratedPrefix), and results obtained on it
// must be reported as results on a generated trace. The model, per request:
//
//  1. Arrivals are a Poisson process of rate QPS, or with Arrival "bursty"
//     a Poisson process of bursts of rate QPS/BurstMean whose sizes are
//     geometric with mean BurstMean; all requests of a burst arrive at the
//     same instant.
//  2. With probability SessionProb (and if a session exists) the request is
//     the next turn of one of the RecentSessions most recent sessions,
//     chosen uniformly: its prompt is that session's previous prompt
//     followed by 1..TurnBlocks new blocks. A session whose prompt has
//     reached MaxInputTokens ends, and the request starts a new one instead.
//  3. Otherwise it starts a new session. Its prompt is a shared prefix
//     followed by its own unique suffix of 1..SuffixMaxBlocks new blocks.
//     The prefix is one of HotPrompts very hot tool prompts (HotBlocks
//     blocks each), each chosen with probability HotShare; otherwise one of
//     Prefixes shared prefixes chosen by a Zipf law of exponent ZipfS over
//     their popularity ranks, whose depth was drawn once, uniformly in
//     [PrefixMinBlocks, PrefixMaxBlocks].
//  4. Prompts longer than MaxInputTokens are truncated to it. Input tokens
//     are len(Blocks)*BlockSize minus a uniform 0..BlockSize-1 partial last
//     block (capped at MaxInputTokens), so that len(Blocks) ==
//     ceil(InputTokens/BlockSize); earlier blocks count as full, also when a
//     later turn extends a prompt. Output tokens are lognormal with mean
//     OutputMean and log-space deviation OutputSigma, at least 1.
//
// Block ids are allocated from a counter in order of first use, like the
// Mooncake ids: a shared prefix always has the same id sequence, and every
// other block gets a fresh id, so equal ids mean equal prefixes. The same
// GenConfig, Seed included, always gives the same trace.
package trace
