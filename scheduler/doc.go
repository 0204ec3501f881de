// Package scheduler decides where an LLM request goes: the DualMap policy
// (two consistent-hash rings give each prompt prefix a candidate pair; the
// choice inside the pair is cache reuse by default and load when the TTFT SLO
// is threatened) and the baseline policies it is compared with.
//
// It is pure: no network, no goroutines, no wall clock (the clock is injected
// through Config.Now). The ext_proc server and the simulator drive the same
// Scheduler through the same methods, so the simulator measures the code that
// serves.
//
// The pieces, one file each:
//   - ring.go: the consistent-hash rings and candidate sets (paper §3.5).
//   - keydepth.go: the adaptive hash-key length, or prefix hotness table (§3.1).
//   - kvindex.go: which chained block hashes each instance is believed to
//     hold; blockset.go, the lock-free set that lets policies read it.
//   - estimator.go: the TTFT estimator with an online per-token cost.
//   - policy*.go: the routing policies, one per file, behind the unexported
//     policy interface; each registers itself by name and is chosen with
//     Config.Policy and its Params (policy.go decodes and validates them).
//   - queue.go: router-side per-instance queues with aging (§3.3).
//   - held.go: the blocks of the requests waiting in each router queue,
//     which the cache lookup of later arrivals counts (a held request's
//     group-mates follow it instead of splitting over the pair).
//   - flow.go: flow control: EnqueueAndWait blocks a caller until its
//     request is dispatched, shed or cancelled; Submit and Waiter are the
//     non-blocking form the simulator drives.
//   - rebalance.go: hotspot migration of queued requests inside the pair (§3.4).
//   - picker.go: the immutable routing snapshot (members, ready flags, rings,
//     key-depth splits) that decisions read without a lock.
//   - scheduler.go: Scheduler, which owns all of the above; its comment
//     says which lock guards what, and the lock order.
//
// The package is not for parsing requests, tokenizing, or talking to Redis:
// those are internal/extproc, internal/tokenize and internal/state; what
// replicas exchange is driven by internal/coord through the methods of
// replica.go. It is the one package of the module meant for import by
// others.
package scheduler
