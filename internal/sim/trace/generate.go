package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// Stream constants of the two PCG generators derived from GenConfig.Seed:
// arrivals and prompts draw from separate streams, so changing the arrival
// process does not change the prompts.
const (
	arrivalStream = 0x6172726976616c73 // "arrivals"
	promptStream  = 0x70726f6d70747321 // "prompts!"
	sloStream     = 0x736c6f2d6d697821 // "slo-mix!"
)

// Generate returns a synthetic tool&agent-like trace following the model
// of the package documentation. Zero fields of cfg take their defaults; an
// invalid field fails with an error wrapping ErrInvalidConfig that names
// it. The result depends only on cfg: the same config (Seed included)
// always gives the same trace. It satisfies the Mooncake format, and its
// Source, starting with GeneratedPrefix, labels it as generated.
func Generate(cfg GenConfig) (*Trace, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	g := newGenerator(c)
	arr := arrivals(c)
	t := &Trace{
		Requests:  make([]Request, c.Requests),
		BlockSize: c.BlockSize,
		Source: fmt.Sprintf("%s synthetic %s workload (seed=%d requests=%d qps=%g arrival=%s%s)",
			GeneratedPrefix, shapeName(c.Shape), c.Seed, c.Requests, c.QPS, c.Arrival, mixLabel(c.SLOMix)),
	}
	slo := rand.New(rand.NewPCG(c.Seed, sloStream))
	for i := range t.Requests {
		t.Requests[i] = g.request(arr[i])
		t.Requests[i].SLO = drawSLO(slo, c.SLOMix)
	}
	return t, nil
}

func shapeName(s string) string {
	if s == ShapeAgent {
		return "tool&agent"
	}
	return s
}

func mixLabel(mix []SLOClass) string {
	if len(mix) == 0 {
		return ""
	}
	return " slo_mix=" + FormatSLOMix(mix)
}

// drawSLO draws a request's SLO class; 0 without a mix.
func drawSLO(rng *rand.Rand, mix []SLOClass) time.Duration {
	if len(mix) == 0 {
		return 0
	}
	u := rng.Float64()
	for _, m := range mix {
		if u < m.Share {
			return m.SLO
		}
		u -= m.Share
	}
	return mix[len(mix)-1].SLO // rounding: the shares sum to 1 within 1e-6
}

// arrivals draws the arrival times of c.Requests requests, the first at 0.
func arrivals(c GenConfig) []time.Duration {
	rng := rand.New(rand.NewPCG(c.Seed, arrivalStream))
	out := make([]time.Duration, c.Requests)
	now := 0.0 // seconds
	switch c.Arrival {
	case ArrivalBursty:
		burstRate := c.QPS / c.BurstMean
		for i := 0; i < len(out); {
			if i > 0 {
				now += rng.ExpFloat64() / burstRate
			}
			for n := geometric(rng, c.BurstMean, len(out)-i); n > 0; n-- {
				out[i] = seconds(now)
				i++
			}
		}
	case ArrivalOnOff:
		// Poisson at OnQPS on a clock that runs only during on periods,
		// then mapped to wall time by inserting the off periods.
		on, period := c.OnSeconds, c.OnSeconds+c.OffSeconds
		for i := range out {
			if i > 0 {
				now += rng.ExpFloat64() / c.OnQPS
			}
			k := math.Floor(now / on)
			out[i] = seconds(k*period + (now - k*on))
		}
	default:
		for i := range out {
			if i > 0 {
				now += rng.ExpFloat64() / c.QPS
			}
			out[i] = seconds(now)
		}
	}
	return out
}

// geometric draws from the geometric law on 1, 2, ... with the given mean,
// capped at limit.
func geometric(rng *rand.Rand, mean float64, limit int) int {
	p := 1 / mean
	if p >= 1 {
		return 1
	}
	u := 1 - rng.Float64() // in (0, 1]
	n := 1 + math.Floor(math.Log(u)/math.Log1p(-p))
	return int(min(n, float64(limit)))
}

func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

// prefix is a shared prompt prefix. Its ids are allocated on first use, so
// ids appear in increasing order along the trace, as in Mooncake traces.
type prefix struct {
	depth int
	ids   []uint64
}

// generator draws the prompts and lengths of requests.
type generator struct {
	c         GenConfig
	rng       *rand.Rand
	next      uint64 // next fresh block id
	maxBlocks int    // ceil(MaxInputTokens / BlockSize)
	hot       []prefix
	shared    []prefix
	zipfCum   []float64 // cumulative Zipf weights of shared, by rank
	sessions  [][]uint64
	ring      int // where the next new session goes once sessions is full
}

func newGenerator(c GenConfig) *generator {
	g := &generator{
		c:         c,
		rng:       rand.New(rand.NewPCG(c.Seed, promptStream)),
		maxBlocks: (c.MaxInputTokens + c.BlockSize - 1) / c.BlockSize,
		hot:       make([]prefix, max(c.HotPrompts, 0)),
		shared:    make([]prefix, max(c.Prefixes, 0)),
		zipfCum:   make([]float64, max(c.Prefixes, 0)),
	}
	switch c.Shape {
	case ShapeFixed: // the one prompt
		g.hot = []prefix{{depth: (min(c.PromptTokens, c.MaxInputTokens) + c.BlockSize - 1) / c.BlockSize}}
		return g
	case ShapeHotPrefix: // the hot prefix
		g.hot = []prefix{{depth: min((c.PrefixTokens+c.BlockSize-1)/c.BlockSize, g.maxBlocks)}}
		return g
	case ShapeChat:
		return g
	}
	for i := range g.hot {
		g.hot[i].depth = min(c.HotBlocks, g.maxBlocks)
	}
	sum := 0.0
	for i := range g.shared {
		d := c.PrefixMinBlocks + g.rng.IntN(c.PrefixMaxBlocks-c.PrefixMinBlocks+1)
		g.shared[i].depth = min(d, g.maxBlocks)
		sum += math.Pow(float64(i+1), -c.ZipfS)
		g.zipfCum[i] = sum
	}
	return g
}

// request draws one request arriving at arrival.
func (g *generator) request(arrival time.Duration) Request {
	var blocks []uint64
	var in int
	bs := g.c.BlockSize
	switch g.c.Shape {
	case ShapeFixed:
		blocks, in = g.fixedPrompt()
	case ShapeChat:
		in = min(1+g.rng.IntN(2*g.c.PromptTokens-1), g.c.MaxInputTokens)
		blocks = g.fresh(nil, (in+bs-1)/bs)
	default:
		if g.c.Shape == ShapeHotPrefix {
			blocks = g.hotPrefixPrompt()
		} else {
			blocks = g.prompt()
		}
		in = min(len(blocks)*bs-g.rng.IntN(bs), g.c.MaxInputTokens)
	}
	sigma := g.c.OutputSigma
	mu := math.Log(g.c.OutputMean) - sigma*sigma/2
	out := math.Round(math.Exp(mu + sigma*g.rng.NormFloat64()))
	return Request{
		Arrival:      arrival,
		InputTokens:  in,
		OutputTokens: int(max(1, min(out, maxGenOutput))),
		Blocks:       blocks,
	}
}

// fixedPrompt returns the one prompt of ShapeFixed: the same blocks and
// length every time.
func (g *generator) fixedPrompt() ([]uint64, int) {
	in := min(g.c.PromptTokens, g.c.MaxInputTokens)
	if len(g.hot) == 0 {
		g.hot = []prefix{{depth: (in + g.c.BlockSize - 1) / g.c.BlockSize}}
	}
	return g.ids(&g.hot[0]), in
}

// hotPrefixPrompt draws a ShapeHotPrefix prompt: with probability
// PrefixShare the hot prefix, otherwise as many fresh blocks, followed by a
// unique suffix of 1..SuffixMaxBlocks blocks.
func (g *generator) hotPrefixPrompt() []uint64 {
	depth := g.hot[0].depth
	var base []uint64
	if g.rng.Float64() < g.c.PrefixShare {
		base = g.ids(&g.hot[0])
	} else {
		base = g.fresh(make([]uint64, 0, depth), depth)
	}
	return g.extend(base, 1+g.rng.IntN(g.c.SuffixMaxBlocks))
}

// prompt draws the blocks of the next prompt: a session's next turn or the
// first turn of a new session.
func (g *generator) prompt() []uint64 {
	c := g.c
	if c.SessionProb > 0 && len(g.sessions) > 0 && g.rng.Float64() < c.SessionProb {
		i := g.rng.IntN(len(g.sessions))
		prev := g.sessions[i]
		var p []uint64
		if len(prev) < g.maxBlocks {
			p = g.extend(prev, 1+g.rng.IntN(c.TurnBlocks))
		} else {
			p = g.newPrompt() // the session hit the context limit: a new one takes its place
		}
		g.sessions[i] = p
		return p
	}
	p := g.newPrompt()
	if len(g.sessions) < c.RecentSessions {
		g.sessions = append(g.sessions, p)
	} else {
		g.sessions[g.ring] = p
		g.ring = (g.ring + 1) % c.RecentSessions
	}
	return p
}

// newPrompt draws a shared prefix (hot, Zipf or none) and a unique suffix.
func (g *generator) newPrompt() []uint64 {
	var base []uint64
	u := g.rng.Float64()
	switch h := len(g.hot); {
	case h > 0 && u < float64(h)*g.c.HotShare:
		base = g.ids(&g.hot[min(int(u/g.c.HotShare), h-1)])
	case len(g.shared) > 0:
		base = g.ids(&g.shared[g.zipf()])
	}
	return g.extend(base, 1+g.rng.IntN(g.c.SuffixMaxBlocks))
}

// extend returns a new slice holding base followed by n fresh blocks,
// truncated to maxBlocks.
func (g *generator) extend(base []uint64, n int) []uint64 {
	if len(base) >= g.maxBlocks {
		return append([]uint64(nil), base[:g.maxBlocks]...)
	}
	n = min(n, g.maxBlocks-len(base))
	p := make([]uint64, len(base), len(base)+n)
	copy(p, base)
	return g.fresh(p, n)
}

// fresh appends n never used block ids to dst.
func (g *generator) fresh(dst []uint64, n int) []uint64 {
	for range n {
		dst = append(dst, g.next)
		g.next++
	}
	return dst
}

// ids returns the block ids of p, allocating them on first use.
func (g *generator) ids(p *prefix) []uint64 {
	if p.ids == nil {
		p.ids = g.fresh(make([]uint64, 0, p.depth), p.depth)
	}
	return p.ids
}

// zipf draws a shared-prefix index: rank k+1 with probability proportional
// to (k+1)^-ZipfS.
func (g *generator) zipf() int {
	u := g.rng.Float64() * g.zipfCum[len(g.zipfCum)-1]
	return min(sort.SearchFloat64s(g.zipfCum, u), len(g.zipfCum)-1)
}
