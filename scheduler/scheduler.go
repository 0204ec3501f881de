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
	KeyDepth    KeyDepthConfig
	Cost        CostConfig
	Queue       QueueConfig
	Rebalance   RebalanceConfig
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
// for concurrent use; none blocks on anything but its own short lock, none
// does I/O.
type Scheduler struct {
	cfg        Config
	policy     policy
	rebalances bool
	epoch      time.Time

	// pick is the routing snapshot (see picker): read without a lock,
	// replaced under mu.
	pick  atomic.Pointer[picker]
	stats stats
	est   *estimator // the pool's per-token cost (Cost.PerInstance: each instance has its own)

	mu      sync.Mutex // guards every field below, and the instances' queues and flags
	members []*instance
	byID    map[string]*instance
	ready   []bool // never changed once published: refreshReady makes a new one
	nready  int
	rings   *ringSet
	kd      *keyDepth
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
	s.est = newEstimator(&s.cfg.Cost, s.cfg.Cost.PerToken)
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
// no allocation. For debugging and benchmarks.
func (s *Scheduler) Pick(r *Request) (Decision, error) {
	if err := checkRequest(r); err != nil {
		return Decision{}, err
	}
	p := s.pick.Load()
	d, key := p.keyFor(r)
	saved := r.key
	r.key = key
	ch, cands, n, err := p.choose(r, s.now())
	r.key = saved
	if err != nil {
		return Decision{}, err
	}
	in := p.members[ch.inst]
	cached := in.cachedTokens(r, p.blockSize)
	dec := Decision{
		Instance:      in.ID,
		Reason:        ch.reason,
		KeyDepth:      d,
		CachedTokens:  cached,
		EstimatedTTFT: seconds(in.est.ttft(in.ahead(), r.Tokens-cached)),
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.state != stateNew {
		return Decision{}, fmt.Errorf("%w: request routed twice", ErrBadRequest)
	}
	now := s.now()
	d, key := s.pick.Load().keyFor(r)
	r.arrived = now
	r.key = key
	r.dec = Decision{KeyDepth: d}
	r.waiter = nil // its own outcome is this call's result
	if err := s.place(r, now, ReasonNone); err != nil {
		return Decision{}, err
	}
	if r.Session == 0 && s.kd.observe(r.Blocks, d, now) {
		s.publish()
	}
	s.stats.Routed.Add(1)
	if r.state == stateDone {
		return Decision{}, ErrLate // rejected as late by its own queue's drain
	}
	if r.state == stateQueued {
		r.waiter = w
	}
	return r.dec, nil
}

// place chooses an instance for r and queues or dispatches it there.
func (s *Scheduler) place(r *Request, now time.Duration, reason Reason) error {
	p := s.pick.Load()
	ch, cands, n, err := p.choose(r, now)
	if err != nil {
		return err
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
	s.assign(r, in, now)
	return nil
}

// assign puts r in in's queue (with its cached estimate there) and lets the
// queue dispatch what it can.
func (s *Scheduler) assign(r *Request, in *instance, now time.Duration) {
	r.inst = in
	r.cached = in.cachedTokens(r, s.cfg.BlockSize)
	r.uncached = r.Tokens - r.cached
	r.dec.Instance = in.ID
	r.dec.CachedTokens = r.cached
	r.dec.EstimatedTTFT = seconds(in.est.ttft(in.ahead(), r.uncached))
	in.addRecent(now, float64(r.uncached))
	if s.cfg.Queue.Budget == 0 {
		s.dispatch(in, r, now)
		return
	}
	s.enqueue(in, r, now)
	s.drain(in, now)
}

// dispatch marks r as sent to in.
func (s *Scheduler) dispatch(in *instance, r *Request, now time.Duration) {
	r.cached = in.cachedTokens(r, s.cfg.BlockSize) // may have grown while it waited
	r.uncached = r.Tokens - r.cached
	r.work = in.pendingTokens.get() + r.uncached
	in.pendingTokens.add(r.uncached)
	if avg := in.avgUncached.get(); avg == 0 {
		in.avgUncached.set(float64(r.uncached))
	} else {
		in.avgUncached.set(avg + 0.1*(float64(r.uncached)-avg))
	}
	in.running.add(1)
	in.addKV(r.Blocks)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.state != stateDispatched {
		return
	}
	now := s.now()
	in := r.inst
	in.pendingTokens.add(-r.uncached)
	r.state = statePrefilled
	in.est.observe(r.work, r.uncached, (now - r.dispatched).Seconds())
	s.drainIfMember(in, now)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	in := r.inst
	switch r.state {
	case stateNew, stateDone:
		return
	case stateQueued:
		s.dequeue(r)
		completed = false
	case stateDispatched:
		in.pendingTokens.add(-r.uncached)
		in.running.add(-1)
	case statePrefilled:
		in.running.add(-1)
	}
	r.state = stateDone
	r.waiter = nil
	if completed {
		s.stats.Completed.Add(1)
	} else {
		s.stats.Cancelled.Add(1)
	}
	s.drainIfMember(in, s.now())
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
			s.drain(in, now)
		}
	}
}

func (s *Scheduler) drainIfMember(in *instance, now time.Duration) {
	if in != nil && in.idx >= 0 {
		s.drain(in, now)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kd.export()
}

// ImportKeyDepth replaces the key-depth table's splits with st.
func (s *Scheduler) ImportKeyDepth(st KeyDepthState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kd.importState(st) {
		s.publish()
	}
}

// SetInstances makes list the pool. Members keep their state (queues,
// cache index, learned cost) by id; new ones start empty; requests queued
// for a removed member are re-routed to their new pair (dispatched, or
// failed if no instance is ready; their waiters are told). Requests already dispatched to a
// removed member are unaffected: finish them as usual.
func (s *Scheduler) SetInstances(list []Instance) error {
	if err := validateInstances(list); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := make(map[string]bool, len(list))
	members := make([]*instance, len(list))
	ids := make([]string, len(list))
	weights := make([]float64, len(list))
	for i, spec := range list {
		keep[spec.ID] = true
		in := s.byID[spec.ID]
		if in == nil {
			in = &instance{healthy: true}
			in.est = s.est
			if s.cfg.Cost.PerInstance {
				in.est = newEstimator(&s.cfg.Cost, s.est.cost())
			}
			s.byID[spec.ID] = in
		}
		in.Instance = spec
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
		in.idx = i
		members[i] = in
		ids[i], weights[i] = spec.ID, spec.Weight
	}
	s.reroute = s.reroute[:0]
	for id, in := range s.byID {
		if !keep[id] {
			s.reroute = append(s.reroute, in.queue...)
			for _, r := range in.queue {
				in.queuedTokens.add(-r.uncached)
			}
			in.queue = nil
			in.nqueued.set(0)
			in.idx = -1
			delete(s.byID, id)
		}
	}
	s.members = members
	rings := newRingSet(s.cfg.Candidates, ids, weights, s.cfg.VirtualNodes)
	s.rings = &rings
	s.added = make([]int, len(members))
	s.refreshReady()
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
	set(in)
	s.refreshReady()
	if !in.ready() && len(in.queue) > 0 {
		s.reroute = append(s.reroute[:0], in.queue...)
		for len(in.queue) > 0 {
			s.dequeue(in.queue[len(in.queue)-1])
		}
		s.rerouteAll()
	}
	return nil
}

// refreshReady recomputes the ready flags and publishes a new picker.
func (s *Scheduler) refreshReady() {
	s.ready = make([]bool, len(s.members)) // the published one is immutable
	s.nready = 0
	for i, in := range s.members {
		s.ready[i] = in.ready()
		if s.ready[i] {
			s.nready++
		}
	}
	s.kd.setInstances(max(s.nready, 1))
	s.publish()
}

// rerouteAll places every request of s.reroute again, keeping its key.
func (s *Scheduler) rerouteAll() {
	now := s.now()
	for _, r := range s.reroute {
		// Still stateQueued: enqueue keeps its wait, so MaxWait and aging
		// run on across a re-route.
		r.inst = nil
		if err := s.place(r, now, ReasonRerouted); err != nil {
			r.state = stateDone
			s.stats.Failed.Add(1)
			r.notifyFailed(err)
			continue
		}
		s.stats.Rerouted.Add(1)
	}
	clear(s.reroute)
	s.reroute = s.reroute[:0]
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
