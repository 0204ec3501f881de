package sim

import (
	"container/heap"
	"fmt"
	"math"
	"time"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/sim/engine"
	"github.com/dualmap/dualmap/internal/sim/trace"
	"github.com/dualmap/dualmap/scheduler"
)

// Prefill/decode pools in the simulator: Prefill instances that only
// prefill (a one-token request, as llm-d's sidecar sends them) and Decode
// instances that decode, and prefill too when the decider keeps a request
// there; the same engine model and profile for both. A request is routed
// to its decode instance by the decode scheduler (DecodePolicy) and, when
// the router's decider (the serving pool's rule: package pool, pd.go)
// sends it to a prefill instance, by the prefill scheduler (Options.Policy)
// there; once that prefill is done its KV travels to the decode instance
// (TransferPerToken seconds per prompt token, the whole prompt, as llm-d's
// simulator charges it) and arrives in the decode engine's prefix cache
// (engine.Receive), so the decode instance computes only the last token.
// One router replica, no router queue (Queue engine): both halves send at
// once, so the comparison with a mixed pool (Simulate with the same
// options) is of placements, not of admission.

// PDOptions size a prefill/decode pool. Zero values mean defaults.
type PDOptions struct {
	Prefill, Decode int // instances of each role (both >= 1)
	// TransferPerToken is the KV transfer's time per prompt token, in
	// seconds (default 3e-6: llm-d's simulator profile for an 8B model
	// on H100s, kv-cache-transfer-time-per-token).
	TransferPerToken float64
	// MinUncachedTokens and DecodeHitRatio are the decider's (defaults
	// the router's, config.DefaultMinUncachedTokens and
	// config.DefaultDecodeHitRatio).
	MinUncachedTokens int
	DecodeHitRatio    float64
	// DecodePolicy routes the decode half (default decode-capacity).
	DecodePolicy string
}

func (p PDOptions) withDefaults() (PDOptions, error) {
	if p.TransferPerToken == 0 {
		p.TransferPerToken = 3e-6
	}
	if p.MinUncachedTokens == 0 {
		p.MinUncachedTokens = config.DefaultMinUncachedTokens
	}
	if p.DecodeHitRatio == 0 {
		p.DecodeHitRatio = config.DefaultDecodeHitRatio
	}
	if p.DecodePolicy == "" {
		p.DecodePolicy = config.DefaultDecodePolicy
	}
	switch {
	case p.Prefill < 1 || p.Decode < 1:
		return p, fmt.Errorf("sim: a P/D pool needs >= 1 prefill and >= 1 decode instance, got %dP+%dD", p.Prefill, p.Decode)
	case p.TransferPerToken < 0 || math.IsNaN(p.TransferPerToken) || math.IsInf(p.TransferPerToken, 0):
		return p, fmt.Errorf("sim: transfer time per token must be >= 0, got %v", p.TransferPerToken)
	case p.MinUncachedTokens < 0 || !(p.DecodeHitRatio > 0 && p.DecodeHitRatio <= 1):
		return p, fmt.Errorf("sim: min_uncached_tokens must be >= 0 and decode_hit_ratio in (0, 1]")
	}
	return p, nil
}

// PDResult is a P/D run's metrics: Result's, with the cache hit rate over
// the prompts where they were prefilled (the prefill instance's hit for a
// remote prefill), and how many requests the decider sent to a prefill
// instance.
type PDResult struct {
	*Result
	Remote      int `json:"remote"`      // measured requests prefilled remotely
	Unavailable int `json:"unavailable"` // of the others, those no prefill instance could take
}

// pdLeg is the prefill half of a request prefilled remotely.
type pdLeg struct {
	s      scheduler.Request
	e      engine.Request
	decode int // the decode engine
	remote bool
}

// pdTransfer is a KV transfer in flight: request r reaches its decode
// engine at time at.
type pdTransfer struct {
	at float64
	r  int
}

type transferHeap []pdTransfer

func (h transferHeap) Len() int           { return len(h) }
func (h transferHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h transferHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *transferHeap) Push(x any)        { *h = append(*h, x.(pdTransfer)) }
func (h *transferHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// pdCluster is the state of one P/D run: a cluster whose engines are the
// prefill instances, then the decode instances.
type pdCluster struct {
	*cluster
	pd        PDOptions
	pre, dec  *scheduler.Scheduler
	legs      []pdLeg
	transfers transferHeap
	unavail   []bool
}

// SimulatePD runs tr through a P/D pool sized by pd (opt.Instances is
// ignored; opt.Replicas must be 1) and returns its metrics.
func SimulatePD(tr *trace.Trace, qps float64, opt Options, pd PDOptions) (*PDResult, error) {
	opt.Instances = max(pd.Prefill+pd.Decode, 1)
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	if pd, err = pd.withDefaults(); err != nil {
		return nil, err
	}
	if opt.Replicas != 1 || len(opt.Scale) > 0 {
		return nil, fmt.Errorf("sim: a P/D run has one router replica and a fixed size")
	}
	if len(tr.Requests) == 0 {
		return nil, fmt.Errorf("sim: empty trace")
	}
	start := time.Now()
	c := &pdCluster{cluster: &cluster{opt: opt, epoch: time.Unix(0, 0), index: map[string]int{}}, pd: pd}
	if err := c.buildPD(); err != nil {
		return nil, err
	}
	c.load(tr, qps)
	c.legs = make([]pdLeg, len(c.reqs))
	c.unavail = make([]bool, len(c.reqs))
	c.runPD()
	res := &PDResult{}
	for i := range c.reqs {
		if l := &c.legs[i]; l.remote {
			// The prompt's cache hit is where it was prefilled.
			c.reqs[i].e.CachedTokens = l.e.CachedTokens
			if i >= max(opt.Warmup, 0) {
				res.Remote++
			}
		}
		if c.unavail[i] && i >= max(opt.Warmup, 0) {
			res.Unavailable++
		}
	}
	res.Result = c.result(qps)
	res.WallSeconds = time.Since(start).Seconds()
	return res, nil
}

func (c *pdCluster) buildPD() error {
	cfg := c.schedulerConfig()
	for i := range c.pd.Prefill + c.pd.Decode {
		p := c.opt.Profile
		p.NoiseSeed ^= c.opt.Seed
		e, err := engine.New(p)
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		id := fmt.Sprintf("prefill-%03d", i)
		if i >= c.pd.Prefill {
			id = fmt.Sprintf("decode-%03d", i-c.pd.Prefill)
		}
		c.index[id] = i
		c.ids = append(c.ids, id)
		c.engines = append(c.engines, e)
		c.eh.add(math.Inf(1))
	}
	c.active = len(c.engines)
	list := func(from, to int) []scheduler.Instance {
		var out []scheduler.Instance
		for _, id := range c.ids[from:to] {
			out = append(out, scheduler.Instance{ID: id})
		}
		return out
	}
	var err error
	if c.pre, err = scheduler.New(cfg, list(0, c.pd.Prefill)); err != nil {
		return fmt.Errorf("sim: prefill scheduler: %w", err)
	}
	dcfg := cfg
	dcfg.Policy, dcfg.Params = c.pd.DecodePolicy, nil
	if c.pd.DecodePolicy == c.opt.Policy {
		dcfg.Params = c.opt.Params
	}
	if c.dec, err = scheduler.New(dcfg, list(c.pd.Prefill, len(c.ids))); err != nil {
		return fmt.Errorf("sim: decode scheduler: %w", err)
	}
	c.reps = []*scheduler.Scheduler{c.dec}
	return nil
}

// runPD is the event loop: arrivals, engine steps, KV transfers, ticks.
func (c *pdCluster) runPD() {
	tick := c.opt.Tick.Seconds()
	next := 0
	nextTick, nextSample := tick, 1.0
	end := c.reqs[len(c.reqs)-1].arrival + c.opt.Horizon.Seconds()
	for c.ended < len(c.reqs) {
		tArr := math.Inf(1)
		if next < len(c.reqs) {
			tArr = c.reqs[next].arrival
		}
		e, tEng := c.eh.min()
		tXfer := math.Inf(1)
		if len(c.transfers) > 0 {
			tXfer = c.transfers[0].at
		}
		t := min(tArr, tEng, tXfer, nextTick, nextSample)
		if t > end {
			break
		}
		c.now = t
		switch t {
		case tEng:
			c.advancePD(e)
		case tXfer:
			x := heap.Pop(&c.transfers).(pdTransfer)
			r := &c.reqs[x.r]
			ei := c.legs[x.r].decode
			c.engines[ei].Receive(r.s.Blocks)
			c.submit(ei, &r.e)
		case tArr:
			c.arrivePD(&c.reqs[next])
			next++
		case nextTick:
			c.pre.Tick()
			c.dec.Tick()
			nextTick += tick
		case nextSample:
			c.sample()
			nextSample++
		}
	}
}

// submit hands an engine request to engine ei at now.
func (c *pdCluster) submit(ei int, e *engine.Request) {
	c.engines[ei].Submit(c.now, e)
	c.eh.update(ei, c.engines[ei].NextTime())
	c.reportPD(ei)
}

// reportPD tells engine ei's own load to the scheduler that routes to it.
func (c *pdCluster) reportPD(ei int) {
	e := c.engines[ei]
	l := scheduler.EngineLoad{Waiting: e.Waiting(), Running: e.Running()}
	s := c.dec
	if ei < c.pd.Prefill {
		s = c.pre
	}
	_ = s.SetEngineLoad(c.ids[ei], l)
}

// arrivePD routes r: its decode instance, then the decider.
func (c *pdCluster) arrivePD(r *request) {
	d, err := c.dec.Submit(&r.s, nil)
	if err != nil || d.Queued {
		r.failed = true // no router queue here: Queued does not happen
		c.ended++
		return
	}
	r.depth = d.KeyDepth
	dei := c.index[d.Instance]
	rule := config.PD{MinUncachedTokens: c.pd.MinUncachedTokens, DecodeHitRatio: c.pd.DecodeHitRatio}
	if rule.Local(r.s.Tokens, d.CachedTokens) != "" {
		c.submit(dei, &r.e)
		return
	}
	l := &c.legs[r.idx]
	l.s = scheduler.Request{Blocks: r.s.Blocks, Tokens: r.s.Tokens, SLO: r.s.SLO}
	pd, err := c.pre.Submit(&l.s, nil)
	if err != nil || pd.Queued {
		c.unavail[r.idx] = true
		c.submit(dei, &r.e)
		return
	}
	r.depth = pd.KeyDepth
	l.remote, l.decode = true, dei
	l.e = engine.Request{ID: int64(len(c.reqs) + r.idx), Blocks: r.e.Blocks, Tokens: r.e.Tokens, Output: 1}
	c.submit(c.index[pd.Instance], &l.e)
}

// advancePD acts on engine ei's events: a prefill leg's end starts its KV
// transfer; a decode request's first token and end are the request's.
func (c *pdCluster) advancePD(ei int) {
	eng := c.engines[ei]
	c.events = eng.Advance(c.now, c.events[:0])
	n := int64(len(c.reqs))
	for _, ev := range c.events {
		if ev.Req.ID >= n {
			i := int(ev.Req.ID - n)
			l := &c.legs[i]
			switch ev.Kind {
			case engine.FirstToken:
				c.pre.FirstToken(&l.s)
			case engine.Completed:
				c.pre.Complete(&l.s)
				heap.Push(&c.transfers, pdTransfer{at: ev.Time + c.pd.TransferPerToken*float64(l.e.Tokens), r: i})
			}
			continue
		}
		r := reqOf(c.cluster, ev.Req)
		switch ev.Kind {
		case engine.FirstToken:
			r.ttft = ev.Time - r.arrival
			c.dec.FirstToken(&r.s)
		case engine.Completed:
			r.done = true
			c.ended++
			c.dec.Complete(&r.s)
		}
	}
	c.eh.update(ei, eng.NextTime())
	c.reportPD(ei)
}
