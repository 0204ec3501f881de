package scheduler

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Scheduler. The zero value of every field means the
// default written next to it; DefaultConfig returns them filled in.
type Config struct {
	// Policy is the routing policy's name (default "dualmap"; see Policies).
	Policy string
	// Params are the policy's own parameters (see each policy file).
	Params Params
	// SLO is the default TTFT objective (default 5s).
	SLO time.Duration
	// BlockSize is the tokens per block of Request.Blocks (default 512).
	BlockSize int
	// Candidates is the number of hash rings, i.e. candidates per key
	// (default 4, chosen by measurement: see docs/evaluation.md; the
	// paper's pair is 2; 1 to 4).
	Candidates int
	// VirtualNodes is the points per instance of weight 1 on each ring
	// (default DefaultVirtualNodes).
	VirtualNodes int
	// CacheTokens is the KV-cache capacity of an instance in tokens when
	// Instance.CacheTokens is 0 (default 1,200,000: 64 GiB of DRAM at
	// Qwen2.5-7B's 57,344 bytes per token).
	CacheTokens int
	// ReportedCache: a dispatch does not record its prompt's blocks in the
	// instance's cache index (the router's estimate of what it cached);
	// the caller records them with AddCached when it learns of them, e.g.
	// from the engine's KV-cache events, late or not at all. Default
	// false: blocks are recorded at dispatch.
	ReportedCache bool
	KeyDepth      KeyDepthConfig
	Cost          CostConfig
	Queue         QueueConfig
	Rebalance     RebalanceConfig
	// Now is the clock (default time.Now). The simulator injects its own.
	Now func() time.Time
}

// DefaultConfig returns the configuration with every default filled in.
func DefaultConfig() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	if c.Policy == "" {
		c.Policy = "dualmap"
	}
	if c.SLO == 0 {
		c.SLO = 5 * time.Second
	}
	if c.BlockSize == 0 {
		c.BlockSize = 512
	}
	if c.Candidates == 0 {
		c.Candidates = 4
	}
	if c.VirtualNodes == 0 {
		c.VirtualNodes = DefaultVirtualNodes
	}
	if c.CacheTokens == 0 {
		c.CacheTokens = 1_200_000
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.KeyDepth = c.KeyDepth.withDefaults()
	if c.Cost.MaxSeqs == 0 && c.Queue.MaxRunning > 0 {
		c.Cost.MaxSeqs = c.Queue.MaxRunning
	}
	c.Cost = c.Cost.withDefaults()
	c.Queue = c.Queue.withDefaults()
	c.Rebalance = c.Rebalance.withDefaults()
	return c
}

// Validate reports the first invalid field of c (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.SLO < 0:
		return fmt.Errorf("slo must be > 0, got %v", c.SLO)
	case c.BlockSize < 1:
		return fmt.Errorf("block_size must be >= 1, got %d", c.BlockSize)
	case c.Candidates < 1 || c.Candidates > maxCandidates:
		return fmt.Errorf("candidates must be in [1, %d], got %d", maxCandidates, c.Candidates)
	case c.VirtualNodes < 1:
		return fmt.Errorf("virtual_nodes must be >= 1, got %d", c.VirtualNodes)
	case c.CacheTokens < 0:
		return fmt.Errorf("cache_tokens must be >= 0, got %d", c.CacheTokens)
	}
	for _, err := range []error{c.KeyDepth.validate(), c.Cost.validate(), c.Queue.validate(), c.Rebalance.validate()} {
		if err != nil {
			return err
		}
	}
	if _, err := newPolicy(c.Policy, c.Params); err != nil {
		return err
	}
	return nil
}

// Stats are cumulative counters.
type Stats struct {
	Routed, Dispatched, Completed, Cancelled    uint64
	Migrations, Rerouted, Expired, Late, Failed uint64
}

// stats are the live counters behind Stats.
type stats struct {
	Routed, Dispatched, Completed, Cancelled    atomic.Uint64
	Migrations, Rerouted, Expired, Late, Failed atomic.Uint64
}

func (c *stats) load() Stats {
	return Stats{
		Routed: c.Routed.Load(), Dispatched: c.Dispatched.Load(), Completed: c.Completed.Load(), Cancelled: c.Cancelled.Load(),
		Migrations: c.Migrations.Load(), Rerouted: c.Rerouted.Load(), Expired: c.Expired.Load(), Late: c.Late.Load(), Failed: c.Failed.Load(),
	}
}

// Scheduler routes requests over a pool of instances. All methods are safe
// for concurrent use; none blocks on anything but short locks, none does
// I/O.
//
// State and locks:
//   - pick, the routing snapshot (see picker), is read without a lock and
//     replaced while holding kdMu (and mu too when membership changes).
//   - Each instance's mu guards its router queue, the state of the
//     requests queued at or dispatched to it, and changes to its load
//     figures and KV index (readers use atomics, see instance). A request
//     is routed, dispatched, completed or cancelled under its instance's
//     lock alone.
//   - mu guards membership (members, byID, the instances' flags and idx)
//     and everything that moves a queued request from one instance to
//     another (rebalancing, re-routing when an instance leaves or stops
//     being ready) or spans all queues (expiry, Tick). A request's
//     instance (Request.inst) changes only with mu and the lock of the
//     instance it leaves held.
//   - kdMu guards the key-depth table.
//
// Lock order: mu, then kdMu or instance locks; two instance locks in
// ascending seq. kdMu and instance locks are never held together. Waiters
// are told with an instance lock held.
type Scheduler struct {
	cfg        Config
	policy     policy
	rebalances bool
	epoch      time.Time

	pick  atomic.Pointer[picker]
	stats stats
	est   *estimator // the pool's per-token cost (Cost.PerInstance: each instance has its own)

	replicas atomic.Int64 // SetReplicas
	// poolSlots is the most running limit learned from SetEngineLimit on
	// any instance (slots.go).
	poolSlots atomic.Int64

	kdMu sync.Mutex // guards kd's counts and splits (its configuration is immutable)
	kd   *keyDepth
	spin atomic.Uint64 // the next variant of a replicated key (see hotprefix.go)

	mu      sync.Mutex // guards every field below; see above for what else
	members []*instance
	byID    map[string]*instance
	index   map[string]int32 // members' indexes by id; replaced, never changed, when membership changes
	ready   []bool           // never changed once published: refreshReady makes a new one
	nready  int
	rings   *ringSet
	seq     uint64 // instances created so far
	moves   []Move // rebalancer scratch
	added   []int  // rebalancer scratch, per member
	reroute []*Request
}

// New returns a Scheduler for cfg over instances (which may be empty).
func New(cfg Config, instances []Instance) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	cfg = cfg.withDefaults()
	pol, _ := newPolicy(cfg.Policy, cfg.Params) // validated above
	s := &Scheduler{
		cfg:    cfg,
		policy: pol,
		epoch:  cfg.Now(),
		byID:   make(map[string]*instance),
		kd:     newKeyDepth(cfg.KeyDepth, 0, cfg.BlockSize),
	}
	s.est = newEstimator(&s.cfg.Cost, s.cfg.Cost.PerToken, 1)
	if rp, ok := pol.(rebalancing); ok {
		s.rebalances = rp.rebalance()
	}
	if err := s.SetInstances(instances); err != nil {
		return nil, err
	}
	return s, nil
}

// Config returns the configuration in use, defaults filled in.
func (s *Scheduler) Config() Config { return s.cfg }

func (s *Scheduler) now() time.Duration { return s.cfg.Now().Sub(s.epoch) }

func (s *Scheduler) sloOf(r *Request) time.Duration {
	if r.SLO > 0 {
		return r.SLO
	}
	return s.cfg.SLO
}

func checkRequest(r *Request) error {
	if r.Tokens < 0 || len(r.Blocks) == 0 && r.Tokens > 0 {
		return fmt.Errorf("%w: %d tokens in %d blocks", ErrBadRequest, r.Tokens, len(r.Blocks))
	}
	return nil
}

// Pick returns where r would go now, without routing it: no state changes,
// no allocation, no lock. For debugging and benchmarks. It uses scratch
// space in r: do not call it on a request that is being routed.
func (s *Scheduler) Pick(r *Request) (Decision, error) {
	if err := checkRequest(r); err != nil {
		return Decision{}, err
	}
	p := s.pick.Load()
	d, key, hot := p.keyFor(r)
	saved, savedHot := r.key, r.hot
	r.key, r.hot = key, hot
	ch, cands, n, err := p.choose(r, s.now())
	r.key, r.hot = saved, savedHot
	if err != nil {
		return Decision{}, err
	}
	in := p.members[ch.inst]
	cached := s.estCached(in, r)
	dec := Decision{
		Instance:      in.ID,
		Reason:        ch.reason,
		KeyDepth:      d,
		CachedTokens:  cached,
		EstimatedTTFT: seconds(in.ttft(r.Tokens - cached)),
	}
	if fb := p.fallback(ch, cands[:n]); fb != nil {
		dec.Fallback = fb.ID
	}
	return dec, nil
}

// Submit routes r without blocking: it picks an instance and either
// dispatches r at once (the returned Decision's Queued is false) or queues
// it in that instance's router queue (Queued is true). A queued request's
// fate is told to w exactly once, by a later call on any goroutine: it is
// dispatched (w.Dispatched) or given up (w.Failed: expired in the queue,
// rejected as late, or no instance left to take it), unless it is cancelled
// first. w may be nil when the caller does not queue (Queue.Budget 0) or
// polls. With Queue.Late = LateReject a request already late when it
// arrives fails at once with ErrLate. The simulator uses Submit;
// EnqueueAndWait is the blocking form for servers.
func (s *Scheduler) Submit(r *Request, w Waiter) (Decision, error) {
	if err := checkRequest(r); err != nil {
		return Decision{}, err
	}
	if r.state != stateNew { // a new request is the caller's alone
		return Decision{}, fmt.Errorf("%w: request routed twice", ErrBadRequest)
	}
	now := s.now()
	d, key, hot := s.pick.Load().keyFor(r)
	r.arrived = now
	r.key, r.hot = key, hot
	r.dec = Decision{KeyDepth: d}
	r.waiter = nil // its own outcome is this call's result
	dec, st, err := s.place(r, now, w)
	if err != nil {
		return Decision{}, err
	}
	if r.Session == 0 {
		s.observe(r.Blocks, d, now)
	}
	s.stats.Routed.Add(1)
	if st == stateDone {
		return Decision{}, ErrLate // rejected as late by its own queue's drain
	}
	return dec, nil
}

// observe feeds the key-depth table and publishes its new splits.
func (s *Scheduler) observe(blocks []uint64, d int, now time.Duration) {
	s.kdMu.Lock()
	defer s.kdMu.Unlock()
	s.kd.setReplicas(int(s.replicas.Load()))
	if s.kd.observe(blocks, d, now) {
		s.publishSplits()
	}
}

// place routes a new request: it chooses an instance and queues or
// dispatches r there, and returns r's decision and state as of then. If
// the instance stopped taking requests since the snapshot was taken, it
// chooses again from the newer one.
func (s *Scheduler) place(r *Request, now time.Duration, w Waiter) (Decision, reqState, error) {
	for {
		in, err := s.prepare(s.pick.Load(), r, now, ReasonNone)
		if err != nil {
			return Decision{}, 0, err
		}
		in.mu.Lock()
		if !in.accepting {
			in.mu.Unlock()
			continue
		}
		s.assign(r, in, now)
		if r.state == stateQueued && r.Priority < 0 {
			// Sheddable: it does not wait.
			s.dequeue(r)
			r.state = stateDone
			s.stats.Failed.Add(1)
			in.mu.Unlock()
			return Decision{}, 0, ErrShed
		}
		if r.state == stateQueued {
			r.waiter = w
		}
		dec, st := r.dec, r.state
		in.mu.Unlock()
		return dec, st, nil
	}
}

// prepare runs the policy for r and records its candidates, fallback and
// reason in r; it returns the chosen instance. The caller owns r: it is new,
// or its instance's lock is held.
func (s *Scheduler) prepare(p *picker, r *Request, now time.Duration, reason Reason) (*instance, error) {
	ch, cands, n, err := p.choose(r, now)
	if err != nil {
		return nil, err
	}
	in := p.members[ch.inst]
	r.ncand = n
	for k := 0; k < n; k++ {
		r.cand[k] = p.members[cands[k]]
	}
	r.dec.Fallback = ""
	if fb := p.fallback(ch, cands[:n]); fb != nil {
		r.dec.Fallback = fb.ID
	}
	if reason == ReasonNone {
		reason = ch.reason
	}
	r.dec.Reason = reason
	if r.Explain != nil {
		p.explain(r.Explain, r, cands[:n], ch.inst)
	}
	return in, nil
}

// assign puts r in in's queue (with its cached estimate there) and lets the
// queue dispatch what it can. The caller holds in.mu.
func (s *Scheduler) assign(r *Request, in *instance, now time.Duration) {
	r.setInst(in)
	r.cached = s.estCached(in, r)
	r.uncached = r.Tokens - r.cached
	r.dec.Instance = in.ID
	r.dec.CachedTokens = r.cached
	r.dec.EstimatedTTFT = seconds(in.ttft(r.uncached))
	in.addRecentLocked(now, float64(r.uncached))
	if !s.queues() {
		s.dispatch(in, r, now)
		return
	}
	s.enqueue(in, r, now)
	s.drain(in, now)
}

// dispatch marks r as sent to in. The caller holds in.mu.
func (s *Scheduler) dispatch(in *instance, r *Request, now time.Duration) {
	r.cached = in.cachedTokens(r, s.cfg.BlockSize) // may have grown while it waited
	r.uncached = r.Tokens - r.cached
	// What r waits for once sent: the engine's prefill work, the other
	// replicas' included as the estimate counts it (without it each of n
	// replicas learned a cost up to n times too high), not the router
	// queues' (their wait is not part of the TTFT measured from dispatch).
	l := in.load()
	l.ahead, l.requests = in.prefillPending(), in.prefilling.get()
	r.work = in.est.sampleOf(l, r.uncached)
	r.aheadAt, r.localAt = l.ahead, in.pendingTokens.get()
	r.busyAt = in.est.startRunning(l)
	in.sinceReport.dispatched.add(1)
	in.pendingTokens.add(r.uncached)
	in.prefilling.add(1)
	in.kvTokens.add(r.Tokens)
	if avg := in.avgUncached.get(); avg == 0 {
		in.avgUncached.set(float64(r.uncached))
	} else {
		in.avgUncached.set(avg + 0.1*(float64(r.uncached)-avg))
	}
	in.running.add(1)
	if !s.cfg.ReportedCache && !in.exact {
		in.kv.add(r.Blocks)
	}
	if r.state == stateQueued {
		r.dec.Waited = now - r.enqueued
	}
	r.state = stateDispatched
	r.dispatched = now
	r.dec.Queued = false
	r.dec.CachedTokens = r.cached
	s.stats.Dispatched.Add(1)
	r.notifyDispatched()
}

// FirstToken reports that r's first token arrived: its prefill is done.
// It feeds the TTFT estimator and may dispatch queued requests.
func (s *Scheduler) FirstToken(r *Request) {
	in := lockOwner(r)
	if in == nil {
		return
	}
	defer in.mu.Unlock()
	if r.state != stateDispatched {
		return
	}
	now := s.now()
	in.pendingTokens.add(-r.uncached)
	in.prefilling.add(-1)
	r.state = statePrefilled
	r.prefilled = now
	r.ownPrefill = min((now - r.dispatched).Seconds(), in.est.ttft(load{}, r.uncached))
	in.est.observe(r.work, (now - r.dispatched).Seconds())
	in.est.ahead.observe(float64(r.localAt), float64(r.aheadAt-r.localAt), float64(r.uncached), (now - r.dispatched).Seconds())
	if r.busyAt >= 0 {
		in.est.busy.observe(float64(r.aheadAt), float64(r.uncached), r.busyAt, (now - r.dispatched).Seconds())
	}
	s.drain(in, now)
}

// Complete reports that r finished (successfully or not) and releases its
// load. On a request still queued it is the same as Cancel.
func (s *Scheduler) Complete(r *Request) {
	s.finish(r, true)
}

// Cancel withdraws r: from its queue if it waits, or releases its load if
// it was dispatched (client gone, upstream failed).
func (s *Scheduler) Cancel(r *Request) {
	s.finish(r, false)
}

func (s *Scheduler) finish(r *Request, completed bool) {
	in := lockOwner(r)
	if in == nil {
		return
	}
	defer in.mu.Unlock()
	switch r.state {
	case stateNew, stateDone:
		return
	case stateQueued:
		s.dequeue(r)
		completed = false
	case stateDispatched:
		in.sinceReport.completed.add(1)
		in.pendingTokens.add(-r.uncached)
		in.prefilling.add(-1)
		in.running.add(-1)
		in.kvTokens.add(-r.Tokens)
	case statePrefilled:
		in.sinceReport.completed.add(1)
		in.running.add(-1)
		in.kvTokens.add(-r.Tokens)
		if completed {
			in.est.observeService((s.now() - r.prefilled).Seconds() + r.ownPrefill)
		}
	}
	r.state = stateDone
	r.waiter = nil
	if completed {
		s.stats.Completed.Add(1)
	} else {
		s.stats.Cancelled.Add(1)
	}
	s.drain(in, s.now())
}

// Tick does the periodic work: it expires requests that waited longer than
// Queue.MaxWait, runs one rebalancing round when the policy migrates, and
// dispatches what the queues can. Call it every 50-200 ms.
func (s *Scheduler) Tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.cfg.Queue.MaxWait > 0 {
		s.expire(now)
	}
	if s.rebalances && !s.cfg.Rebalance.External {
		s.apply(s.plan(now), now)
	}
	for _, in := range s.members {
		if in.ready() {
			in.mu.Lock()
			s.drain(in, now)
			in.mu.Unlock()
		}
	}
}

// Rebalances reports whether the policy migrates queued requests (callers
// running the rebalancer themselves check it).
func (s *Scheduler) Rebalances() bool { return s.rebalances }

// Stats returns the cumulative counters.
func (s *Scheduler) Stats() Stats { return s.stats.load() }

// Instances reports every member's state, in ring-member order.
func (s *Scheduler) Instances() []InstanceState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := make([]InstanceState, len(s.members))
	for i, in := range s.members {
		st[i] = in.state()
	}
	return st
}

// KeyDepthState exports the key-depth table (for sharing with replicas).
func (s *Scheduler) KeyDepthState() KeyDepthState {
	s.kdMu.Lock()
	defer s.kdMu.Unlock()
	return s.kd.export()
}

// ImportKeyDepth replaces the key-depth table's splits with st.
func (s *Scheduler) ImportKeyDepth(st KeyDepthState) {
	s.kdMu.Lock()
	defer s.kdMu.Unlock()
	if s.kd.importState(st) {
		s.publishSplits()
	}
}

// ValidateInstances reports the first reason SetInstances would refuse
// list (an empty or repeated id, a weight that is not a finite number >= 0,
// a negative cache capacity), without changing anything.
func ValidateInstances(list []Instance) error {
	if err := validateInstances(list); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	return nil
}

// SetInstances makes list the pool. Members keep their state (queues,
// cache index, learned cost) by id; new ones start empty; requests queued
// for a removed member are re-routed to their new pair (dispatched, or
// failed if no instance is ready; their waiters are told). Requests already dispatched to a
// removed member are unaffected: finish them as usual.
func (s *Scheduler) SetInstances(list []Instance) error {
	if err := ValidateInstances(list); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := make(map[string]bool, len(list))
	members := make([]*instance, len(list))
	ids := make([]string, len(list))
	weights := make([]float64, len(list))
	// Only the arcs of members that came, went or changed weight change
	// on the rings (ring.rebuild): remap takes the kept members' points
	// from their old index to the new one, added lists the others.
	remap := make([]int32, len(s.members))
	for i := range remap {
		remap[i] = -1
	}
	var added []int32
	for i, spec := range list {
		keep[spec.ID] = true
		in := s.byID[spec.ID]
		if in == nil {
			s.seq++
			in = &instance{Instance: Instance{ID: spec.ID}, healthy: true, seq: s.seq, idx: -1, replicas: &s.replicas, poolSlots: &s.poolSlots}
			in.est = s.est
			if s.cfg.Cost.PerInstance {
				in.est = newEstimator(&s.cfg.Cost, s.est.cost(), s.est.stepScale())
			}
			s.byID[spec.ID] = in
		}
		if in.idx >= 0 && pointCount(in.Weight, s.cfg.VirtualNodes) == pointCount(spec.Weight, s.cfg.VirtualNodes) {
			remap[in.idx] = int32(i)
		} else {
			added = append(added, int32(i))
		}
		// Not in.Instance = spec: pickers read in.ID without a lock.
		in.Weight, in.CacheTokens = spec.Weight, spec.CacheTokens
		capTokens := spec.CacheTokens
		if capTokens == 0 {
			capTokens = s.cfg.CacheTokens
		}
		in.mu.Lock()
		if in.kv == nil {
			in.kv = newKVIndex(capTokens / s.cfg.BlockSize)
		} else {
			in.kv.setCapacity(capTokens / s.cfg.BlockSize)
		}
		in.mu.Unlock()
		members[i] = in
		ids[i], weights[i] = spec.ID, spec.Weight
	}
	same := len(added) == 0 && len(list) == len(s.members) && s.rings != nil
	for o, m := range remap {
		same = same && m == int32(o)
	}
	for i, in := range members {
		in.idx = i
	}
	if !same {
		rs := s.rings
		if rs == nil {
			e := emptyRingSet(s.cfg.Candidates)
			rs = &e
		}
		rings := rs.rebuild(remap, added, ids, weights, s.cfg.VirtualNodes)
		s.rings = &rings
	}
	s.members = members
	s.index = make(map[string]int32, len(members))
	for i, in := range members {
		s.index[in.ID] = int32(i)
	}
	s.added = make([]int, len(members))
	s.refreshReady()
	// Removed members take no more requests; their queues are re-routed.
	s.reroute = s.reroute[:0]
	for id, in := range s.byID {
		if !keep[id] {
			in.mu.Lock()
			in.accepting = false
			s.reroute = append(s.reroute, in.queue...)
			in.mu.Unlock()
			in.idx = -1
			delete(s.byID, id)
		}
	}
	s.rerouteAll()
	return nil
}

// SetHealthy marks an instance healthy or not. Requests queued for an
// instance that stops being ready are re-routed.
func (s *Scheduler) SetHealthy(id string, healthy bool) error {
	return s.setFlag(id, func(in *instance) { in.healthy = healthy })
}

// SetDraining marks an instance draining (it takes no new requests; those
// dispatched to it finish) or not.
func (s *Scheduler) SetDraining(id string, draining bool) error {
	return s.setFlag(id, func(in *instance) { in.draining = draining })
}

// ErrUnknownInstance is returned for an id that is not a member.
var ErrUnknownInstance = errors.New("scheduler: unknown instance")

func (s *Scheduler) setFlag(id string, set func(*instance)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.byID[id]
	if in == nil {
		return fmt.Errorf("%w %q", ErrUnknownInstance, id)
	}
	healthy, draining := in.healthy, in.draining
	set(in)
	if in.healthy == healthy && in.draining == draining {
		return nil // nothing changed: no new picker (a membership source repeats every flag)
	}
	s.refreshReady()
	if !in.ready() {
		in.mu.Lock()
		s.reroute = append(s.reroute[:0], in.queue...)
		in.mu.Unlock()
		s.rerouteAll()
	}
	return nil
}

// refreshReady recomputes the ready flags and publishes a new picker. An
// instance takes requests (accepting) from before the picker offering it
// is published until after one that does not is.
func (s *Scheduler) refreshReady() {
	s.ready = make([]bool, len(s.members)) // the published one is immutable
	s.nready = 0
	for i, in := range s.members {
		s.ready[i] = in.ready()
		if s.ready[i] {
			s.nready++
			in.setAccepting(true)
		}
	}
	s.kdMu.Lock()
	s.kd.setInstances(max(s.nready, 1))
	s.publish()
	s.kdMu.Unlock()
	for i, in := range s.members {
		if !s.ready[i] {
			in.setAccepting(false)
		}
	}
}

// rerouteAll places every request of s.reroute, queued at instances that
// no longer take requests, again, keeping its key. Those cancelled
// meanwhile are skipped.
func (s *Scheduler) rerouteAll() {
	now := s.now()
	for _, r := range s.reroute {
		s.rerouteOne(r, r.inst, now) // r.inst cannot change: we hold mu
	}
	clear(s.reroute)
	s.reroute = s.reroute[:0]
}

func (s *Scheduler) rerouteOne(r *Request, from *instance, now time.Duration) {
	from.mu.Lock()
	if r.state != stateQueued {
		from.mu.Unlock()
		return
	}
	to, err := s.prepare(s.pick.Load(), r, now, ReasonRerouted)
	if err == nil && to == from {
		err = ErrNoEndpoint // not possible: from is not ready in the picker
	}
	if err != nil {
		s.dequeue(r)
		r.state = stateDone
		s.stats.Failed.Add(1)
		r.notifyFailed(err)
		from.mu.Unlock()
		return
	}
	if !lockSecond(from, to) && r.state != stateQueued { // cancelled while from was unlocked
		from.mu.Unlock()
		to.mu.Unlock()
		return
	}
	// Still stateQueued: enqueue keeps its wait, so MaxWait and aging run
	// on across a re-route.
	s.dequeue(r)
	r.setInst(to)
	from.mu.Unlock()
	s.assign(r, to, now)
	to.mu.Unlock()
	s.stats.Rerouted.Add(1)
}

// lockSecond locks to while from is locked, keeping the lock order: if to
// comes first, it unlocks from, locks both in order and returns false (the
// caller re-checks what from's lock protected).
func lockSecond(from, to *instance) bool {
	if from.seq < to.seq {
		to.mu.Lock()
		return true
	}
	from.mu.Unlock()
	to.mu.Lock()
	from.mu.Lock()
	return false
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
