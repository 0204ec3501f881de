package kvevents

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/dualmap/dualmap/internal/hashing"
)

// Modes of a subscription.
const (
	// Connect dials each engine's publisher (engines that bind, vLLM's
	// default tcp://*:5557): every router replica hears every engine.
	Connect = "connect"
	// Bind listens on one endpoint that publishers dial (vLLM with a
	// non-wildcard endpoint, llm-d's simulator): topics name the
	// instances.
	Bind = "bind"
)

// Config is one pool's subscription. Zero values mean the defaults noted.
type Config struct {
	Pool string // names the pool in logs and metrics
	Mode string // Connect (default) or Bind
	// Port is the engines' publisher port in Connect mode (default 5557);
	// data-parallel rank r publishes on Port + r.
	Port int
	// PortOffset, when not 0, replaces Port by the instance's own port
	// plus PortOffset (several engines on one host).
	PortOffset int
	// Ranks is the number of data-parallel ranks per engine (default 1).
	Ranks int
	// Bind is the endpoint Bind mode listens on, e.g. "tcp://0.0.0.0:5557".
	Bind string
	// ReplayPort is the engines' replay (ROUTER) port, rank r on
	// ReplayPort + r; 0: no replay, a gap makes the instance fall back to
	// the predicted index.
	ReplayPort int
	// ReplayOffset, when not 0, replaces ReplayPort by the instance's own
	// port plus ReplayOffset.
	ReplayOffset int
	// Topic is the subscription's topic prefix ("" every topic).
	Topic string
	// BlockSize is the pool's block size: an engine using another one is
	// refused (its events ignored, its view predicted).
	BlockSize int
	// MaxBlocks bounds the blocks held per instance and rank (default
	// 1<<22, 4194304).
	MaxBlocks int
	// ReplayTimeout bounds one replay exchange (default 2s).
	ReplayTimeout time.Duration
	// Backoff is the first delay before re-dialling a publisher; it
	// doubles up to MaxBackoff (defaults 100ms and 10s).
	Backoff, MaxBackoff time.Duration
	// Refresh is how often membership is read (default 1s).
	Refresh time.Duration
	// Queue is the number of messages buffered between the sockets and
	// the index (default 1024); a full queue makes the sockets wait, and
	// the engines' own high-water marks drop what they cannot send, which
	// shows as a gap.
	Queue int

	Log     *slog.Logger     // default: discard
	Metrics *Metrics         // default: unregistered
	Now     func() time.Time // default time.Now
}

// Defaults returns the defaults of the fields that have one (Log, Metrics
// and Now aside).
func Defaults() Config {
	c := Config{}.withDefaults()
	c.Log, c.Metrics, c.Now = nil, nil, nil
	return c
}

func (c Config) withDefaults() Config {
	if c.MaxBlocks == 0 {
		c.MaxBlocks = 1 << 22
	}
	if c.Mode == "" {
		c.Mode = Connect
	}
	if c.Port == 0 {
		c.Port = 5557
	}
	if c.Ranks == 0 {
		c.Ranks = 1
	}
	if c.ReplayTimeout == 0 {
		c.ReplayTimeout = 2 * time.Second
	}
	if c.Backoff == 0 {
		c.Backoff = 100 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 10 * time.Second
	}
	if c.Refresh == 0 {
		c.Refresh = time.Second
	}
	if c.Queue == 0 {
		c.Queue = 1024
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Mode != Connect && c.Mode != Bind:
		return fmt.Errorf("mode must be %q or %q, got %q", Connect, Bind, c.Mode)
	case c.Port < 1 || c.Port > 65535:
		return fmt.Errorf("port must be in [1, 65535], got %d", c.Port)
	case c.Ranks < 1 || c.Ranks > 64 || c.Port+c.Ranks-1 > 65535:
		return fmt.Errorf("ranks must be in [1, 64] with port + ranks - 1 <= 65535, got %d", c.Ranks)
	case c.ReplayPort < 0 || c.ReplayPort > 0 && c.ReplayPort+c.Ranks-1 > 65535:
		return fmt.Errorf("replay_port must be 0 (none) or in [1, 65535] with ranks, got %d", c.ReplayPort)
	case c.PortOffset < -65535 || c.PortOffset > 65535 || c.ReplayOffset < -65535 || c.ReplayOffset > 65535:
		return errors.New("port_offset and replay_offset must be in [-65535, 65535]")
	case c.Mode == Bind && c.Bind == "":
		return errors.New("bind: required in bind mode (e.g. tcp://0.0.0.0:5557)")
	case c.BlockSize < 1:
		return fmt.Errorf("block size must be positive, got %d", c.BlockSize)
	case c.Queue < 1 || c.MaxBlocks < 0 || c.ReplayTimeout < 0 || c.Backoff < 0 || c.MaxBackoff < c.Backoff:
		return errors.New("queue, max_blocks, replay_timeout and backoffs must be positive")
	case len(c.Topic) > maxTopic:
		return fmt.Errorf("topic longer than %d bytes", maxTopic)
	}
	if c.Mode == Bind {
		if _, err := endpoint(c.Bind); err != nil {
			return err
		}
	}
	return nil
}

// Subscriber is one pool's KV-event subscription.
type Subscriber struct {
	cfg Config
	// ready is closed once Bind mode listens (tests dial after it).
	ready chan struct{}
	addr  net.Addr // where Bind mode listens, once ready
}

// New returns a subscriber for cfg, which must be valid.
func New(cfg Config) (*Subscriber, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kvevents: %w", err)
	}
	return &Subscriber{cfg: cfg.withDefaults(), ready: make(chan struct{})}, nil
}

// Listening returns a channel closed once Bind mode listens, and the
// address it listens on (useful with port 0).
func (s *Subscriber) Listening() (<-chan struct{}, func() net.Addr) {
	return s.ready, func() net.Addr { return s.addr }
}

// inbound is one message from a socket.
type inbound struct {
	id     string // instance ("" in Bind mode: from the topic)
	rank   int    // the publisher's rank by port (Connect mode), else -1
	frames [][]byte
	// redialled: the reader (re)connected to this publisher; no frames.
	redialled bool
}

type streamKey struct {
	id   string
	rank int
}

type stream struct {
	last int64  // the last sequence number applied
	sum  uint64 // a hash of its payload
	// redialled: the connection was re-established since; a message that
	// does not follow last at once may come from a restarted publisher
	// whose sequence went past last while the socket was down.
	redialled bool
}

// Run subscribes until ctx ends: members returns the pool's instances
// (read every Refresh), target is told what the events say. Call it once
// per Subscriber; it returns an error only when bind mode cannot listen.
func (s *Subscriber) Run(ctx context.Context, members func() []string, target Target) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	o := &owner{s: s, cfg: s.cfg, target: target, tracker: NewTracker(target, s.cfg.BlockSize, s.cfg.MaxBlocks),
		streams: map[streamKey]*stream{}, members: map[string]bool{}, readers: map[streamKey]context.CancelFunc{},
		in: make(chan inbound, s.cfg.Queue), logged: map[string]bool{}}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if s.cfg.Mode == Bind {
		l, err := s.listen()
		if err != nil {
			return err
		}
		context.AfterFunc(ctx, func() { l.Close() })
		wg.Go(func() { o.acceptBound(ctx, l, &wg) })
	}
	o.wg = &wg
	o.refresh(ctx, members())
	t := time.NewTicker(s.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			o.refresh(ctx, members())
		case m := <-o.in:
			o.handle(ctx, m)
		}
	}
}

func (s *Subscriber) listen() (net.Listener, error) {
	addr, err := tcpAddr(s.cfg.Bind)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("kvevents: listen on %s: %w", s.cfg.Bind, err)
	}
	s.addr = l.Addr()
	close(s.ready)
	return l, nil
}

// owner is the goroutine that owns the tracker and the streams' state.
type owner struct {
	s       *Subscriber
	cfg     Config
	target  Target
	tracker *Tracker
	streams map[streamKey]*stream
	members map[string]bool
	readers map[streamKey]context.CancelFunc // Connect mode: one per instance and rank
	in      chan inbound
	wg      *sync.WaitGroup
	dec     Decoder
	last    TrackerStats
	logged  map[string]bool // instances whose block-size mismatch was logged
}

// refresh follows membership: new instances get readers (Connect mode),
// removed ones lose theirs and are forgotten.
func (o *owner) refresh(ctx context.Context, ids []string) {
	now := make(map[string]bool, len(ids))
	for _, id := range ids {
		now[id] = true
	}
	for id := range o.members {
		if now[id] {
			continue
		}
		delete(o.members, id)
		for k, stop := range o.readers {
			if k.id == id {
				stop()
				delete(o.readers, k)
			}
		}
		for k := range o.streams {
			if k.id == id {
				delete(o.streams, k)
			}
		}
		o.tracker.Forget(id)
		delete(o.logged, id)
	}
	for _, id := range ids {
		if o.members[id] {
			continue
		}
		o.members[id] = true
		if o.cfg.Mode != Connect {
			continue
		}
		for r := 0; r < o.cfg.Ranks; r++ {
			ep, err := instanceEndpoint(id, o.cfg.Port, o.cfg.PortOffset, r)
			if err != nil {
				o.cfg.Log.Warn("kv events: instance not subscribed", "pool", o.cfg.Pool, "instance", id, "error", err)
				break
			}
			rctx, stop := context.WithCancel(ctx)
			k := streamKey{id, r}
			o.readers[k] = stop
			o.wg.Go(func() { o.readDialled(rctx, k, ep) })
		}
	}
	n, mism := 0, 0
	for id := range o.members {
		if o.tracker.Exact(id) {
			n++
		}
		if o.tracker.Mismatch(id) != 0 {
			mism++
		}
	}
	o.cfg.Metrics.exact.WithLabelValues(o.cfg.Pool).Set(float64(n))
	o.cfg.Metrics.mismatched.WithLabelValues(o.cfg.Pool).Set(float64(mism))
}

// readDialled dials one publisher and forwards its messages, re-dialling
// with backoff when the connection fails, until ctx ends.
func (o *owner) readDialled(ctx context.Context, k streamKey, ep string) {
	wait := o.cfg.Backoff
	for ctx.Err() == nil {
		z, err := dialZMTP(ctx, ep, "SUB", o.cfg.ReplayTimeout)
		if err == nil {
			err = z.subscribe(o.cfg.Topic)
		}
		got := false
		if err == nil {
			select { // what comes next may follow a restart the socket hid
			case o.in <- inbound{id: k.id, rank: k.rank, redialled: true}:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		for err == nil {
			var frames [][]byte
			if frames, err = z.recv(); err != nil {
				break
			}
			got = true
			select {
			case o.in <- inbound{id: k.id, rank: k.rank, frames: frames}:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		if z != nil {
			z.close()
		}
		if ctx.Err() != nil {
			return
		}
		if got {
			wait = o.cfg.Backoff
			o.cfg.Metrics.reconnects.WithLabelValues(o.cfg.Pool).Inc()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, o.cfg.MaxBackoff)
	}
}

// acceptBound takes the publishers that dial the bound socket, one
// goroutine each, until ctx ends. A publisher whose connection fails is
// its own to re-dial.
func (o *owner) acceptBound(ctx context.Context, l net.Listener, wg *sync.WaitGroup) {
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // the listener failed: Run's context ends it anyway
		}
		wg.Go(func() {
			z, err := handshake(ctx, c, "SUB", o.cfg.ReplayTimeout)
			if err != nil {
				c.Close()
				return
			}
			defer z.close()
			if z.subscribe(o.cfg.Topic) != nil {
				return
			}
			for {
				frames, err := z.recv()
				if err != nil {
					return
				}
				select {
				case o.in <- inbound{rank: -1, frames: frames}:
				case <-ctx.Done():
					return
				}
			}
		})
	}
}

// TopicInstance returns the instance a topic names by llm-d's convention,
// kv@<ip>:<port>@<model>, or "".
func TopicInstance(topic []byte) string {
	rest, ok := bytes.CutPrefix(topic, []byte("kv@"))
	if !ok {
		return ""
	}
	addr, _, _ := bytes.Cut(rest, []byte("@"))
	return string(addr)
}

// handle applies one message.
func (o *owner) handle(ctx context.Context, m inbound) {
	pool := o.cfg.Pool
	if m.redialled {
		if st := o.streams[streamKey{m.id, m.rank}]; st != nil {
			st.redialled = true
		}
		return
	}
	msg, err := SplitLive(m.frames)
	if err != nil {
		o.cfg.Metrics.decodeErrs.WithLabelValues(pool).Inc()
		return
	}
	id := m.id
	if id == "" {
		id = TopicInstance(msg.Topic)
		if !o.members[id] {
			o.cfg.Metrics.unknown.WithLabelValues(pool).Inc()
			return
		}
	} else if !o.members[id] {
		return // it left while its message waited
	}
	b, err := o.dec.Decode(msg.Payload)
	if err != nil {
		o.cfg.Metrics.decodeErrs.WithLabelValues(pool).Inc()
		return
	}
	rank := m.rank // Connect mode: by port; Bind mode: the batch's own
	if rank < 0 {
		rank = b.Rank
	}
	k := streamKey{id, max(rank, 0)}
	st := o.streams[k]
	recovered := true // recovery reuses the decoder: b must be decoded again
	switch {
	case st == nil:
		st = &stream{last: -1}
		o.streams[k] = st
		if msg.Seq == 0 {
			o.tracker.Restarted(id, k.rank, true) // seen from the publisher's start
		} else {
			o.tracker.SetComplete(id, k.rank, false)
			if o.recover(ctx, id, k.rank, st, 0, msg.Seq) {
				o.tracker.SetComplete(id, k.rank, true)
			}
		}
	case msg.Seq <= st.last || st.redialled && !o.sameProcess(ctx, id, k.rank, st): // the publisher restarted
		o.cfg.Metrics.restarts.WithLabelValues(pool).Inc()
		o.cfg.Log.Info("kv events: engine publisher restarted, its blocks purged", "pool", pool, "instance", id, "rank", k.rank, "seq", msg.Seq, "last", st.last)
		st.last = -1
		o.tracker.Restarted(id, k.rank, msg.Seq == 0)
		if msg.Seq > 0 && o.recover(ctx, id, k.rank, st, 0, msg.Seq) {
			o.tracker.SetComplete(id, k.rank, true)
		}
	case msg.Seq > st.last+1: // a gap (st.redialled is false here)
		o.cfg.Metrics.gaps.WithLabelValues(pool).Inc()
		if !o.recover(ctx, id, k.rank, st, st.last+1, msg.Seq) {
			o.cfg.Log.Warn("kv events: gap not repaired, the instance falls back to the predicted index", "pool", pool, "instance", id, "rank", k.rank, "from", st.last+1, "to", msg.Seq)
			o.tracker.SetComplete(id, k.rank, false)
		}
	default:
		recovered = false
	}
	st.redialled = false
	if recovered {
		if b, err = o.dec.Decode(msg.Payload); err != nil {
			return // cannot happen: it decoded above
		}
	}
	o.apply(id, k.rank, &b)
	st.last, st.sum = msg.Seq, payloadSum(msg.Payload)
}

func payloadSum(p []byte) uint64 { return hashing.Mix64(hashing.FNV1a(p)) }

// sameProcess tells, after the connection to a publisher was re-made,
// whether it is the process whose batches were applied (true) or a new
// one whose sequence happens to go on from where the old one stopped: the
// replay socket must still serve the last batch applied, byte for byte.
// Without replay it cannot tell and answers false (the instance is
// purged and falls back to the prediction until its view is whole).
func (o *owner) sameProcess(ctx context.Context, id string, rank int, st *stream) bool {
	if st.last < 0 {
		return true
	}
	if o.cfg.ReplayPort == 0 && o.cfg.ReplayOffset == 0 {
		return false
	}
	ep, err := instanceEndpoint(id, o.cfg.ReplayPort, o.cfg.ReplayOffset, rank)
	if err != nil {
		return false
	}
	same := false
	_ = o.replayRaw(ctx, ep, st.last, func(seq int64, payload []byte) bool {
		same = seq == st.last && payloadSum(payload) == st.sum
		return false
	})
	return same
}

// apply feeds one batch to the tracker and counts what it did.
func (o *owner) apply(id string, rank int, b *Batch) {
	pool, m := o.cfg.Pool, o.cfg.Metrics
	o.tracker.Apply(id, rank, b)
	m.batches.WithLabelValues(pool).Inc()
	for i := range b.Events {
		m.events.WithLabelValues(pool, b.Events[i].Kind.String()).Inc()
	}
	if b.Skipped > 0 {
		m.events.WithLabelValues(pool, Unknown.String()).Add(float64(b.Skipped))
	}
	if b.TS > 0 {
		lag := float64(o.cfg.Now().UnixNano())/1e9 - b.TS
		m.lag.WithLabelValues(pool).Observe(max(lag, 0))
	}
	st := o.tracker.Stats()
	add := func(outcome string, now, before uint64) {
		if now > before {
			m.blocks.WithLabelValues(pool, outcome).Add(float64(now - before))
		}
	}
	add("stored", st.Stored, o.last.Stored)
	add("removed", st.Removed, o.last.Removed)
	add("orphan", st.Orphans, o.last.Orphans)
	add("unkeyed", st.Unkeyed, o.last.Unkeyed)
	o.last = st
	if bs := o.tracker.Mismatch(id); bs != 0 && !o.logged[id] {
		o.logged[id] = true
		o.cfg.Log.Error("kv events: the engine's block size differs from the pool's block_size: its events are ignored and its cache view stays predicted; set block_size to the engine's",
			"pool", pool, "instance", id, "engine_block_size", bs, "block_size", o.cfg.BlockSize)
	}
}

// recover asks instance id's replay socket for the batches from seq from
// up to (not including) upto and applies them; true when every one of
// them arrived in order.
func (o *owner) recover(ctx context.Context, id string, rank int, st *stream, from, upto int64) bool {
	pool := o.cfg.Pool
	if o.cfg.ReplayPort == 0 && o.cfg.ReplayOffset == 0 {
		o.cfg.Metrics.replays.WithLabelValues(pool, "none").Inc()
		return false
	}
	ep, err := instanceEndpoint(id, o.cfg.ReplayPort, o.cfg.ReplayOffset, rank)
	if err != nil {
		o.cfg.Metrics.replays.WithLabelValues(pool, "failed").Inc()
		return false
	}
	next, err := o.replay(ctx, ep, from, upto, func(seq int64, payload []byte, b *Batch) {
		o.apply(id, rank, b)
		st.last, st.sum = seq, payloadSum(payload)
	})
	if err != nil || next != upto {
		o.cfg.Metrics.replays.WithLabelValues(pool, "failed").Inc()
		o.cfg.Log.Warn("kv events: replay failed", "pool", pool, "instance", id, "rank", rank, "endpoint", ep, "from", from, "upto", upto, "got_to", next, "error", err)
		return false
	}
	o.cfg.Metrics.replays.WithLabelValues(pool, "ok").Inc()
	return true
}

// replay runs one exchange with a replay socket and calls apply for each
// batch from seq from on, in order, stopping at upto, a hole, the end
// marker or the timeout. It returns the sequence number it expected next.
func (o *owner) replay(ctx context.Context, ep string, from, upto int64, apply func(int64, []byte, *Batch)) (int64, error) {
	next := from
	var failed error
	err := o.replayRaw(ctx, ep, from, func(seq int64, payload []byte) bool {
		switch {
		case seq < next:
			return true
		case seq == 1 && next == 0 && from == 0:
			// A publisher that numbers from 1 (llm-d's simulator): a buffer
			// that starts at 1 lost nothing before it, unless it dropped
			// exactly one batch, when it is full to the batch.
			next = 1
		case seq > next:
			failed = fmt.Errorf("replay has %d, want %d", seq, next)
			return false
		}
		if next >= upto {
			return false // the live message that asked for the replay: applied by the caller
		}
		b, err := o.dec.Decode(payload)
		if err != nil {
			o.cfg.Metrics.decodeErrs.WithLabelValues(o.cfg.Pool).Inc()
			failed = err
			return false
		}
		apply(seq, payload, &b)
		next++
		return next < upto
	})
	if failed != nil {
		return next, failed
	}
	return next, err
}

// replayRaw asks the replay socket at ep for the batches from seq from on
// and calls each with them, in the order they come, until each returns
// false, the end marker (seq -1), an error or the timeout.
func (o *owner) replayRaw(ctx context.Context, ep string, from int64, each func(int64, []byte) bool) error {
	ctx, cancel := context.WithTimeout(ctx, o.cfg.ReplayTimeout)
	defer cancel()
	z, err := dialZMTP(ctx, ep, "DEALER", o.cfg.ReplayTimeout)
	if err != nil {
		return err
	}
	defer z.close()
	if err := z.send([]byte{}, AppendSeq(nil, from)); err != nil {
		return err
	}
	for {
		frames, err := z.recv()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		m, err := SplitReplay(frames)
		if err != nil {
			o.cfg.Metrics.decodeErrs.WithLabelValues(o.cfg.Pool).Inc()
			return err
		}
		if m.Seq < 0 || !each(m.Seq, m.Payload) { // the end marker, or enough
			return nil
		}
	}
}

// instanceEndpoint is the tcp endpoint of instance id's socket of rank:
// on port + rank, or, with an offset, on the instance's own port + offset
// + rank.
func instanceEndpoint(id string, port, offset, rank int) (string, error) {
	host, own, err := net.SplitHostPort(id)
	if err != nil {
		return "", fmt.Errorf("instance address %q is not host:port", id)
	}
	p := port + rank
	if offset != 0 {
		n, err := strconv.Atoi(own)
		if err != nil {
			return "", fmt.Errorf("instance address %q has no numeric port", id)
		}
		p = n + offset + rank
	}
	if p < 1 || p > 65535 {
		return "", fmt.Errorf("port %d of instance %q is out of range", p, id)
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(p)), nil
}
