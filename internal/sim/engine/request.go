package engine

// Request is one prompt submitted to an Engine. The caller sets ID, Blocks,
// Tokens and Output; the engine fills in the rest. The engine keeps the
// pointer until the request completes: do not change or resubmit it before.
type Request struct {
	ID int64
	// Blocks are the chained hashes of the prompt's blocks of BlockSize
	// tokens (the last may be partial): equal hashes mean equal prefixes.
	// They may be empty (no cache reuse).
	Blocks []uint64
	// Tokens is the prompt length (Submit raises values below 1 to 1).
	Tokens int
	// Output is the number of tokens to generate (Submit raises values
	// below 1 to 1).
	Output int

	// Truncated is set when Submit cut the prompt to MaxModelLen.
	Truncated bool
	// CachedTokens is the prefix-cache hit (HBM + DRAM) decided when the
	// request's prefill started.
	CachedTokens int
	// DRAMTokens is the part of CachedTokens that came from the DRAM tier.
	DRAMTokens int

	// Preemptions counts how often the realistic model preempted the
	// request (its KV blocks freed, to be recomputed).
	Preemptions int
	// OutputCapped is set when Submit lowered Output so that prompt and
	// output fit MaxModelLen (realistic model).
	OutputCapped bool

	// Arrived is the arrival time (Submit sets it to its now if zero);
	// PrefillStart the start of the step that admitted the request;
	// FirstToken the end of its last prefill step; Done the end of its last
	// decode step. All in seconds.
	Arrived, PrefillStart, FirstToken, Done float64

	kv kvState // the realistic model's bookkeeping
}

// Request states in the realistic model.
const (
	stateWaiting uint8 = iota
	statePrefill
	stateDecode
	stateDone
)

// kvState is what the realistic model tracks per request.
type kvState struct {
	held     int     // leading Blocks held (hashed, shared)
	anon     int     // anonymous blocks held
	computed int     // tokens to prefill: prompt plus output generated before a preemption
	gen      int     // output tokens generated when the request last entered decode (or was preempted)
	decodeAt int64   // the step whose end started the current decode
	finish   int64   // the step whose end completes the request
	seq      int64   // admission order of the current run
	stint    int32   // bumped at each preemption: older heap entries are stale
	cost     float64 // prefill cost multiplier (prefill_noise)
	queued   int     // tokens counted in waitingTokens while waiting
	state    uint8
	first    bool // the first token is out
	resumed  bool // admitted again after a preemption
}

// EventKind is what happened to a request.
type EventKind uint8

const (
	// FirstToken: the request's prefill finished and its first token is out.
	FirstToken EventKind = iota + 1
	// Completed: the request generated its last token.
	Completed
)

func (k EventKind) String() string {
	switch k {
	case FirstToken:
		return "first-token"
	case Completed:
		return "completed"
	}
	return "unknown"
}

// Event reports that Req reached Kind at Time (the end of a step).
type Event struct {
	Kind EventKind
	Req  *Request
	Time float64
}

// Stats are an engine's cumulative counters.
type Stats struct {
	Submitted int64 // requests submitted
	Truncated int64 // submitted requests cut to MaxModelLen
	Admitted  int64 // admissions: prefills started (a preempted request counts again when readmitted)
	Completed int64 // requests that generated their last token

	// Token counts over admitted requests: prompt tokens (after
	// truncation), the part served from the prefix cache, and the part of
	// that which came from the DRAM tier.
	PromptTokens int64
	CachedTokens int64
	DRAMTokens   int64

	// Realistic model: preemptions by recompute, the prompt and output
	// tokens prefilled again when preempted requests were readmitted
	// (after their prefix-cache hit), and requests whose Output was capped
	// to fit MaxModelLen.
	Preemptions      int64
	RecomputedTokens int64
	OutputCapped     int64

	Steps    int64   // steps finished
	BusyTime float64 // total duration of the finished steps, seconds
}
