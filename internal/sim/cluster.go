package sim

import (
	"fmt"
	"github.com/dualmap/dualmap/internal/config"
	"math"
	"math/rand/v2"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/internal/sim/engine"
	"github.com/dualmap/dualmap/internal/sim/trace"
	"github.com/dualmap/dualmap/scheduler"
)

// request is one trace request in flight through the simulated cluster.
type request struct {
	idx     int
	arrival float64 // seconds
	replica int
	s       scheduler.Request
	e       engine.Request
	engine  int
	ttft    float64 // seconds from arrival; -1 until the first token
	slo     float64 // this request's TTFT objective in seconds (the trace's or Options.SLO)
	done    bool
	failed  bool
	depth   int
	c       *cluster
}

// Dispatched and Failed make a request its own scheduler.Waiter: the
// replica's queue tells it when it leaves (with the replica's lock held, so
// they only note it; the event loop acts once the call returns).
func (r *request) Dispatched(_ *scheduler.Request, d scheduler.Decision) {
	r.c.fired = append(r.c.fired, fired{r: r, instance: d.Instance})
}

func (r *request) Failed(*scheduler.Request, error) {
	r.c.fired = append(r.c.fired, fired{r: r, failed: true})
}

// fired is a queued request's fate, noted by its Waiter.
type fired struct {
	r        *request
	instance string
	failed   bool
}

// cluster is the state of one simulated run.
type cluster struct {
	opt     Options
	now     float64
	epoch   time.Time
	reps    []*scheduler.Scheduler
	engines []*engine.Engine
	ids     []string
	index   map[string]int // instance id -> engine
	active  int            // instances currently members
	eh      engineHeap
	fired   []fired // what the last scheduler call dispatched or failed
	events  []engine.Event
	hub     *coord.Hub           // shared by the replicas when coordinated
	links   []*coord.Link        // per replica, on hub
	coords  []*coord.Coordinator // per replica, over links
	reqs    []request
	ended   int // requests completed or failed
	// imperfect information (Options.Info)
	infoRng *rand.Rand
	notes   []cacheNote // cache-index records on their way, by time
	noteAt  int         // first note not yet delivered
	// load sampling
	cvSum     float64
	cvSamples int
	timeline  []Sample
}

// cacheNote is a cache-index record a router gets at a later time.
type cacheNote struct {
	at      float64
	replica int
	id      string
	blocks  []uint64
}

// Sample is every instance's load (pending prefill plus router-queued
// tokens) at one point of simulated time.
type Sample struct {
	T    float64 `json:"t"`
	Load []int   `json:"load"`
}

func instanceID(i int) string { return fmt.Sprintf("engine-%03d", i) }

func (c *cluster) clock() time.Time { return c.epoch.Add(time.Duration(c.now * float64(time.Second))) }

// Simulate runs tr (arrival times rescaled to qps requests/s when qps > 0)
// through a cluster built from opt and returns its metrics.
func Simulate(tr *trace.Trace, qps float64, opt Options) (*Result, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(tr.Requests) == 0 {
		return nil, fmt.Errorf("sim: empty trace")
	}
	start := time.Now()
	c := &cluster{opt: opt, epoch: time.Unix(0, 0), index: map[string]int{}}
	if err := c.build(); err != nil {
		return nil, err
	}
	c.load(tr, qps)
	c.run()
	res := c.result(qps)
	res.WallSeconds = time.Since(start).Seconds()
	return res, nil
}

func (c *cluster) build() error {
	o := c.opt
	cfg := c.schedulerConfig()
	c.active = o.Instances
	if err := c.grow(o.Instances); err != nil {
		return err
	}
	for r := 0; r < o.Replicas; r++ {
		s, err := scheduler.New(cfg, c.members())
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		c.reps = append(c.reps, s)
	}
	return c.connect()
}

// schedulerConfig is the routers' scheduler configuration for c's options.
func (c *cluster) schedulerConfig() scheduler.Config {
	o := c.opt
	hbm, dram := o.Profile.CacheTokens()
	cfg := o.Scheduler
	cfg.Policy, cfg.Params, cfg.SLO = o.Policy, o.Params, o.SLO
	cfg.Queue.Budget, cfg.Queue.Adaptive = o.admission()
	cfg.Queue.MaxRunning = max(cfg.Queue.MaxRunning, 0) // a variant's -1: none
	cfg.BlockSize = o.Profile.BlockSize
	cfg.CacheTokens = max(hbm+dram, 1)
	if cfg.Cost.PerToken == 0 {
		cfg.Cost.PerToken = o.Profile.PrefillPerToken
	}
	// The router knows its engines' settings, as a deployment does: the
	// TTFT estimate's step, slot and memory terms start from the profile
	// (scheduler/estimator.go), and a router queue bounds waits as serve
	// does (limits.max_queue_wait), so requests past it fail instead of
	// waiting for the horizon.
	if cfg.Cost.StepTokens == 0 {
		cfg.Cost.StepTokens = o.Profile.MaxBatchedTokens
	}
	if cfg.Cost.StepBase == 0 {
		cfg.Cost.StepBase = o.Profile.DecodeStepBase
	}
	if cfg.Cost.DecodePerSeq == 0 {
		cfg.Cost.DecodePerSeq = o.Profile.DecodePerSeq
	}
	if cfg.Cost.MaxSeqs == 0 {
		cfg.Cost.MaxSeqs = o.Profile.MaxNumSeqs
	}
	if cfg.Cost.KVTokens == 0 {
		cfg.Cost.KVTokens = hbm
	}
	if cfg.Queue.MaxWait == 0 && (cfg.Queue.Budget > 0 || cfg.Queue.Adaptive) {
		cfg.Queue.MaxWait = config.DefaultMaxQueueWait
	}
	if f := o.Info.CostPrior; f > 0 {
		cfg.Cost.PerToken *= f
	}
	cfg.ReportedCache = o.Info.reported()
	if o.RebalanceSLO > 0 {
		cfg.Rebalance.PendingTokens = max(1, int(o.RebalanceSLO*o.SLO.Seconds()/cfg.Cost.PerToken))
	}
	c.infoRng = rand.New(rand.NewPCG(o.Seed, 0x696e666f)) // "info"
	cfg.Now = c.clock
	cfg.Rebalance.External = c.coordinated() // leased, in rebalance
	return cfg
}

// grow makes sure engines 0..n-1 exist.
func (c *cluster) grow(n int) error {
	for len(c.engines) < n {
		p := c.opt.Profile
		p.NoiseSeed ^= c.opt.Seed // prefill noise: per request, the same on every instance
		e, err := engine.New(p)
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		id := instanceID(len(c.engines))
		c.index[id] = len(c.engines)
		c.ids = append(c.ids, id)
		c.engines = append(c.engines, e)
		c.eh.add(math.Inf(1))
	}
	return nil
}

func (c *cluster) members() []scheduler.Instance {
	list := make([]scheduler.Instance, c.active)
	for i := range list {
		list[i] = scheduler.Instance{ID: c.ids[i]}
	}
	return list
}

// load prepares the requests: arrival times rescaled, prompts truncated to
// the profile's max model length (both the router and the engine see the
// truncated prompt, as when a gateway truncates).
func (c *cluster) load(tr *trace.Trace, qps float64) {
	scale := 1.0
	if qps > 0 {
		if d := tr.Requests[len(tr.Requests)-1].Arrival.Seconds(); d > 0 && len(tr.Requests) > 1 {
			scale = float64(len(tr.Requests)-1) / d / qps
		}
	}
	rng := rand.New(rand.NewPCG(c.opt.Seed, 0x5eed))
	bs := c.opt.Profile.BlockSize
	maxLen := c.opt.Profile.MaxModelLen
	c.reqs = make([]request, len(tr.Requests))
	for i, tq := range tr.Requests {
		r := &c.reqs[i]
		r.idx = i
		r.ttft = -1
		r.arrival = tq.Arrival.Seconds() * scale
		if qps > 0 && scale == 1.0 && tr.Requests[len(tr.Requests)-1].Arrival == 0 {
			r.arrival = float64(i) / qps // a trace with no duration: evenly spaced
		}
		r.replica = rng.IntN(c.opt.Replicas)
		tokens, blocks := tq.InputTokens, tq.Blocks
		if maxLen > 0 && tokens > maxLen {
			tokens = maxLen
			blocks = blocks[:min(len(blocks), (maxLen+bs-1)/bs)]
			r.e.Truncated = true
		}
		out := max(tq.OutputTokens, 1)
		r.c = c
		r.s = scheduler.Request{Blocks: blocks, Tokens: tokens, SLO: tq.SLO}
		r.slo = c.opt.SLO.Seconds()
		if tq.SLO > 0 {
			r.slo = tq.SLO.Seconds()
		}
		r.e = engine.Request{ID: int64(i), Blocks: blocks, Tokens: tokens, Output: out, Truncated: r.e.Truncated}
	}
}

// run is the event loop.
func (c *cluster) run() {
	o := c.opt
	tick := o.Tick.Seconds()
	sync := o.SyncInterval.Seconds()
	next := 0
	nextTick, nextSample := tick, 1.0
	nextSync := math.Inf(1)
	if o.Replicas > 1 && sync > 0 {
		nextSync = sync
	}
	scaleAt := 0
	poll := o.Info.MetricsPoll.Seconds()
	nextPoll := math.Inf(1)
	if poll > 0 {
		nextPoll = poll
	}
	end := c.reqs[len(c.reqs)-1].arrival + o.Horizon.Seconds()
	for c.ended < len(c.reqs) {
		tArr := math.Inf(1)
		if next < len(c.reqs) {
			tArr = c.reqs[next].arrival
		}
		e, tEng := c.eh.min()
		tScale := math.Inf(1)
		if scaleAt < len(o.Scale) {
			tScale = o.Scale[scaleAt].At.Seconds()
		}
		tNote := math.Inf(1)
		if c.noteAt < len(c.notes) {
			tNote = c.notes[c.noteAt].at
		}
		t := min(tArr, tEng, nextTick, nextSync, nextSample, tScale, tNote, nextPoll)
		if t > end {
			break
		}
		c.now = t
		switch t {
		case tEng:
			c.advance(e)
		case tArr:
			c.arrive(&c.reqs[next])
			next++
		case tScale:
			c.scale(o.Scale[scaleAt].Instances)
			scaleAt++
		case nextTick:
			for i, s := range c.reps {
				s.Tick()
				c.handle()
				c.rebalance(i) // migrations it dispatched are handled there
			}
			nextTick += tick
		case nextSync:
			c.exchange()
			nextSync += sync
		case nextSample:
			c.sample()
			nextSample++
		case tNote:
			c.deliverNote()
		case nextPoll:
			for ei := range c.engines[:c.active] {
				c.reportLoad(ei)
			}
			nextPoll += poll
		}
	}
}

func (c *cluster) arrive(r *request) {
	s := c.reps[r.replica]
	d, err := s.Submit(&r.s, r)
	switch {
	case err != nil:
		r.failed = true
		c.ended++
	case !d.Queued:
		c.send(r, d.Instance)
	}
	r.depth = d.KeyDepth
	c.handle() // the call may have dispatched or failed others
}

// send submits r to the engine of instance id.
func (c *cluster) send(r *request, id string) {
	ei := c.index[id]
	r.engine = ei
	c.engines[ei].Submit(c.now, &r.e)
	c.eh.update(ei, c.engines[ei].NextTime())
	if c.coords != nil {
		c.coords[r.replica].Dispatched(id, r.s.Blocks)
	}
	if c.opt.Info.reported() && c.infoRng.Float64() >= c.opt.Info.IndexDrop {
		c.notes = append(c.notes, cacheNote{at: c.now + c.opt.Info.IndexDelay.Seconds(), replica: r.replica, id: id, blocks: r.s.Blocks})
	}
	if c.opt.Info.MetricsPoll == 0 {
		c.reportLoad(ei)
	}
}

// deliverNote gives the next cache-index record to its router. Notes are
// queued in time order: every one has the same delay.
func (c *cluster) deliverNote() {
	n := &c.notes[c.noteAt]
	_ = c.reps[n.replica].AddCached(n.id, n.blocks) // unknown after scale-in: nothing to record
	*n = cacheNote{}
	c.noteAt++
	if c.noteAt > 1024 && c.noteAt*2 > len(c.notes) { // compact: bounded by the notes in flight
		c.notes = append(c.notes[:0], c.notes[c.noteAt:]...)
		c.noteAt = 0
	}
}

// reportLoad tells every router the load engine ei reports about itself.
func (c *cluster) reportLoad(ei int) {
	e := c.engines[ei]
	l := scheduler.EngineLoad{Waiting: e.Waiting(), Running: e.Running()}
	for _, s := range c.reps {
		_ = s.SetEngineLoad(c.ids[ei], l) // an instance scaled in is unknown to the routers
	}
}

// handle acts on what the last scheduler call dispatched or failed.
func (c *cluster) handle() {
	for _, f := range c.fired {
		if f.failed {
			f.r.failed = true
			c.ended++
			continue
		}
		c.send(f.r, f.instance)
	}
	clear(c.fired)
	c.fired = c.fired[:0]
}

func (c *cluster) advance(ei int) {
	eng := c.engines[ei]
	c.events = eng.Advance(c.now, c.events[:0])
	for _, ev := range c.events {
		r := reqOf(c, ev.Req)
		s := c.reps[r.replica]
		switch ev.Kind {
		case engine.FirstToken:
			r.ttft = ev.Time - r.arrival
			s.FirstToken(&r.s)
		case engine.Completed:
			r.done = true
			c.ended++
			s.Complete(&r.s)
		}
		c.handle()
	}
	c.eh.update(ei, eng.NextTime())
	if c.opt.Info.MetricsPoll == 0 {
		c.reportLoad(ei)
	}
}

func reqOf(c *cluster, e *engine.Request) *request { return &c.reqs[e.ID] }

// scale changes the membership of every replica to the first n instances.
func (c *cluster) scale(n int) {
	if err := c.grow(n); err != nil {
		panic(err) // the profile was validated: engine.New cannot fail here
	}
	c.active = n
	for _, s := range c.reps {
		if err := s.SetInstances(c.members()); err != nil {
			panic(err)
		}
		c.handle()
	}
}

// sample records the load CV (and the timeline) once a second.
func (c *cluster) sample() {
	n := c.active
	load := make([]int, len(c.engines))
	for i, e := range c.engines {
		load[i] = e.PendingPrefillTokens()
	}
	for _, s := range c.reps {
		for _, st := range s.Instances() {
			load[c.index[st.ID]] += st.QueuedTokens
		}
	}
	var sum, sq float64
	for _, l := range load[:n] {
		sum += float64(l)
		sq += float64(l) * float64(l)
	}
	if mean := sum / float64(n); mean > 0 {
		c.cvSum += math.Sqrt(math.Max(sq/float64(n)-mean*mean, 0)) / mean
		c.cvSamples++
	}
	if c.opt.Timeline {
		c.timeline = append(c.timeline, Sample{T: c.now, Load: load})
	}
}
