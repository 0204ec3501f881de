package scheduler

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/dualmap/dualmap/internal/hashing"
)

// ErrNoEndpoint is returned when no ready (healthy, non-draining) instance
// can take a request.
var ErrNoEndpoint = errors.New("scheduler: no ready endpoint")

// ErrBadRequest is returned for a request the scheduler cannot route
// (negative token count, more blocks than tokens).
var ErrBadRequest = errors.New("scheduler: bad request")

// ErrNotQueued is returned when an operation needs a request that is waiting
// in a router queue and it is not.
var ErrNotQueued = errors.New("scheduler: request is not queued")

// Request is one request as the scheduler sees it. The caller fills the
// exported input fields, passes the same *Request to every call about it and
// must not change them afterwards. The scheduler keeps the pointer until the
// request is completed, cancelled or expired.
type Request struct {
	// Blocks are the chained hashes of the prompt's token blocks: equal
	// values mean equal prefixes (see ChainHash).
	Blocks []uint64
	// Tokens is the prompt length in tokens.
	Tokens int
	// SLO is this request's TTFT objective; 0 means Config.SLO.
	SLO time.Duration
	// Session, when non-zero, is the ring key instead of the prompt prefix
	// (session affinity): every request of a session gets the same
	// candidates, and the key-depth table is not consulted (KeyDepth 0).
	Session uint64
	// Only, when not empty, restricts the request to these instance ids
	// (a gateway's subset hint): it is routed, re-routed and migrated only
	// among the ready members named, and fails with ErrNoEndpoint when
	// none is. Routing such a request fills a per-request mask (allocated
	// on its first decision); requests without it do not allocate.
	Only []string
	// Priority orders requests in the router queues: a higher priority is
	// dispatched first (within a priority, the queue's own order applies),
	// and a request with a negative priority is sheddable: it fails with
	// ErrShed at once instead of waiting in a router queue.
	// Default 0.
	Priority int
	// Explain, when not nil, is filled with the candidates the decision
	// looked at (for tracing; see Explain). The caller owns it.
	Explain *Explain

	dec        Decision // where it went; changes when dispatched, migrated or re-routed
	state      reqState
	inst       *instance                // see setInst
	cand       [maxCandidates]*instance // candidate set at routing time
	ncand      int
	cached     int // cached tokens on inst, estimated when routed or moved
	uncached   int // Tokens - cached
	arrived    time.Duration
	enqueued   time.Duration
	dispatched time.Duration
	prefilled  time.Duration // when its first token came
	ownPrefill float64       // seconds of its own prefill in a slot (FirstToken)
	work       sample        // the estimate's parts at dispatch (for learning)
	aheadAt    int           // the pending prefill, all replicas', it was dispatched behind (admission.go)
	localAt    int           // this replica's part of aheadAt
	busyAt     float64       // requests in flight once it started, -1 if it waited for a slot (busyfit.go)
	qpos       int           // index in inst.queue while queued
	held       int           // leading blocks recorded in inst's held index while queued
	key        uint64        // ring key: the chained hash of the first KeyDepth blocks
	hot        bool          // key is a variant of a replicated hot key (hotprefix.go)
	waiter     Waiter        // told when a queued request is dispatched or failed

	owner atomic.Pointer[instance] // inst, for lockOwner

	// Policy input scratch (see picker.choose): the request already lives
	// on the heap, so the policy's view of it does not allocate.
	pview  view
	pcands [maxCandidates]int32
	mask   []bool // the ready flags restricted to Only (see picker.restrict)
}

// allows reports whether r may go to in.
func (r *Request) allows(in *instance) bool {
	if len(r.Only) == 0 {
		return true
	}
	for _, id := range r.Only {
		if id == in.ID {
			return true
		}
	}
	return false
}

// setInst moves r to in. The caller holds the lock of r's instance, if it
// has one, and in's.
func (r *Request) setInst(in *instance) {
	r.inst = in
	r.owner.Store(in)
}

type reqState uint8

const (
	stateNew reqState = iota
	stateQueued
	stateDispatched // sent, prefill not finished
	statePrefilled  // first token seen
	stateDone
)

// Reason says why a policy chose an instance.
type Reason uint8

// Reasons, as reported in Decision.Reason and debug headers.
const (
	ReasonNone     Reason = iota
	ReasonCache           // the candidate with the longer cached prefix
	ReasonLoad            // cache choice would miss the SLO: lower estimated TTFT
	ReasonTie             // equal cached prefixes: the less loaded
	ReasonOverflow        // both candidates would miss the SLO: global minimum TTFT
	ReasonOnly            // a single ready candidate
	ReasonPolicy          // a baseline policy's own rule
	ReasonMigrated        // moved by the rebalancer
	ReasonRerouted        // its instance left, drained or failed while it waited
	ReasonHolder          // outside the candidates: a longer cached prefix, a lower estimate
	ReasonSlot            // the choice's engine is full: a free sequence slot, a lower estimate
)

var reasonNames = [...]string{"none", "cache", "load", "tie", "overflow", "only", "policy", "migrated", "rerouted", "holder", "slot"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Decision is a routing outcome.
type Decision struct {
	Instance string // id of the chosen instance
	Fallback string // another candidate for failover, or ""
	Reason   Reason
	KeyDepth int // key length in key blocks (KeyDepthConfig.BlockTokens tokens each)
	// CachedTokens is the estimated cached prefix on Instance.
	CachedTokens int
	// EstimatedTTFT is the estimate on Instance when routed.
	EstimatedTTFT time.Duration
	// Queued is true while the request waits in Instance's router queue.
	Queued bool
	// Waited is how long a dispatched request waited in router queues (0
	// when it was dispatched as it arrived).
	Waited time.Duration
}

// ChainHash returns the chained hash of a block whose own content hash is
// block and whose parent prefix hashed to parent (0 for the first block).
// Equal results mean equal prefixes (up to 64-bit collisions). Callers that
// have per-block ids rather than token ids use it to build Request.Blocks.
// It is hashing.ChainHash, exported here for code outside this module.
func ChainHash(parent, block uint64) uint64 { return hashing.ChainHash(parent, block) }
