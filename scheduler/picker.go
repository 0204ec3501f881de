package scheduler

import (
	"fmt"
	"sync/atomic"
	"time"
)

// picker is what a routing decision reads: the members, which of them are
// ready, the rings and the key-depth split set, as of the last change to
// any of them. It is immutable once published (Scheduler.pick): a change
// builds a new one (copy on write), so key computation, candidate lookup
// and the policy's pick run without the Scheduler's lock. The members'
// load, read by the policies, lives in the instances themselves (see
// instance).
type picker struct {
	members    []*instance
	index      map[string]int32 // member index by id
	ready      []bool
	nready     int
	rings      *ringSet
	split      map[uint64]uint64 // copy of the key-depth table's split set
	replicas   map[uint64]uint32 // copy of its replica counts (nil: none)
	spin       *atomic.Uint64    // the Scheduler's: which variant of a replicated key comes next
	kd         *keyDepth         // only its configuration is read
	policy     policy
	policyName string
	blockSize  int
	slo        time.Duration // the default TTFT objective
	held       string        // QueueConfig.Held
}

// keyFor returns r's key depth and ring key, and whether the key is a hot
// one replicated over several candidate sets (see hotprefix.go).
func (p *picker) keyFor(r *Request) (int, uint64, bool) {
	if r.Session != 0 {
		return 0, r.Session, false
	}
	d := p.kd.depthWith(p.split, r.Blocks)
	key := p.kd.key(r.Blocks, d)
	if p.replicas != nil {
		n := p.replicas[key]
		if n <= 1 && len(r.Blocks) > 0 {
			n = p.replicas[r.Blocks[len(r.Blocks)-1]] // the whole prompt is hot
		}
		if n > 1 {
			return d, variant(key, p.spin.Add(1)%uint64(n)), true
		}
	}
	return d, key, false
}

func (p *picker) sloOf(r *Request) time.Duration {
	if r.SLO > 0 {
		return r.SLO
	}
	return p.slo
}

// choose runs the policy for r (whose key is set) at now. The candidates
// are returned by value; the policy sees them, and its view, through
// scratch space in r, so nothing escapes to the heap.
func (p *picker) choose(r *Request, now time.Duration) (choice, [maxCandidates]int32, int, error) {
	ready, nready := p.ready, p.nready
	if len(r.Only) > 0 {
		ready, nready = p.restrict(r)
	}
	if nready == 0 {
		return choice{}, [maxCandidates]int32{}, 0, ErrNoEndpoint
	}
	n := p.rings.candidates(r.key, ready, &r.pcands)
	r.pview = view{
		members:   p.members,
		ready:     ready,
		nready:    nready,
		rings:     p.rings,
		blockSize: p.blockSize,
		now:       now,
		slo:       p.sloOf(r).Seconds(),
		held:      p.held,
	}
	cands := r.pcands
	ch, err := p.policy.pick(&r.pview, r, r.pcands[:n])
	if err == nil && (ch.inst < 0 || int(ch.inst) >= len(p.members) || !ready[ch.inst]) {
		err = fmt.Errorf("scheduler: policy %s chose member %d, which is not ready", p.policyName, ch.inst)
	}
	return ch, cands, n, err
}

// restrict returns the ready flags of the members r.Only names, and how
// many are set, in r's mask.
func (p *picker) restrict(r *Request) ([]bool, int) {
	if cap(r.mask) < len(p.members) {
		r.mask = make([]bool, len(p.members))
	}
	m := r.mask[:len(p.members)]
	clear(m)
	n := 0
	for _, id := range r.Only {
		if i, ok := p.index[id]; ok && p.ready[i] && !m[i] {
			m[i] = true
			n++
		}
	}
	return m, n
}

// fallback returns the instance to report as r's failover target.
func (p *picker) fallback(ch choice, cands []int32) *instance {
	if ch.fallback >= 0 && ch.fallback != ch.inst {
		return p.members[ch.fallback]
	}
	for _, c := range cands {
		if c != ch.inst {
			return p.members[c]
		}
	}
	return nil
}

// publish builds and publishes a picker from the current membership and
// split set. Called with s.mu and s.kdMu held, when membership changes.
func (s *Scheduler) publish() {
	s.pick.Store(&picker{
		members:    s.members,
		index:      s.index,
		ready:      s.ready,
		nready:     s.nready,
		rings:      s.rings,
		split:      s.kd.splits(),
		replicas:   s.kd.replicaSet(),
		spin:       &s.spin,
		kd:         s.kd,
		policy:     s.policy,
		policyName: s.cfg.Policy,
		blockSize:  s.cfg.BlockSize,
		slo:        s.cfg.SLO,
		held:       s.cfg.Queue.Held,
	})
}

// publishSplits publishes the current picker with the key-depth table's
// current split set. Called with s.kdMu held (which every publication
// holds), when the split set changes.
func (s *Scheduler) publishSplits() {
	p := *s.pick.Load()
	p.split = s.kd.splits()
	p.replicas = s.kd.replicaSet()
	s.pick.Store(&p)
}
