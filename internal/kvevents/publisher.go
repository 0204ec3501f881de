package kvevents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// PublisherConfig configures a Publisher. Zero values mean the defaults
// noted.
type PublisherConfig struct {
	// Endpoint is where live batches go, e.g. "tcp://*:5557". As vLLM
	// does, the publisher binds when the host is "*", "::" or "0.0.0.0"
	// (or Mode is Bind) and dials otherwise (or Mode is Connect).
	Endpoint string
	Mode     string
	// Replay, when set, is where the replay socket (ROUTER) binds.
	Replay string
	// Topic is the topic frame of every message ("" an empty frame).
	Topic string
	// Encoding of the events.
	Encoding Encoding
	// ReplayTopic puts the topic frame in replay replies (recent vLLM);
	// false leaves it out (older vLLM, SGLang).
	ReplayTopic bool
	// Buffer is how many batches the replay socket can serve (default
	// 10000, vLLM's buffer_steps).
	Buffer int
	// HWM is how many live messages may wait for slow subscribers before
	// new ones are dropped (default 100000, vLLM's hwm).
	HWM int
}

// Publisher publishes KV-event batches in vLLM's wire format: the test
// engine's (dualmap engine --kv-events) and the tests'. Each Publisher
// numbers its batches from 0, as an engine process does; a restarted
// engine is a new Publisher. Safe for concurrent use.
type Publisher struct {
	cfg    PublisherConfig
	pub    zmq4.Socket
	router zmq4.Socket // nil without replay
	cancel context.CancelFunc
	done   chan struct{}
	// dialing: the live socket dials in the background; dialed is closed
	// when that dialer has returned (connected, or cancelled by Close).
	dialing bool
	dialed  chan struct{}

	// mu guards seq and ring.
	mu   sync.Mutex
	seq  int64
	ring []replayed // the last Buffer batches, by seq % Buffer
}

type replayed struct {
	seq     int64
	payload []byte
}

// NewPublisher opens the sockets.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if cfg.Buffer == 0 {
		cfg.Buffer = 10000
	}
	if cfg.HWM == 0 {
		cfg.HWM = 100000
	}
	if cfg.Buffer < 0 || cfg.HWM < 0 {
		return nil, errors.New("kvevents: publisher buffer and hwm must be positive")
	}
	registerTransport()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Publisher{cfg: cfg, cancel: cancel, done: make(chan struct{}), dialed: make(chan struct{}), ring: make([]replayed, 0, min(cfg.Buffer, 1024))}
	fail := func(err error) (*Publisher, error) {
		p.Close()
		return nil, err
	}
	ep, err := endpoint(cfg.Endpoint)
	if err != nil {
		return fail(err)
	}
	binds := publisherBinds(cfg)
	if binds {
		p.pub = zmq4.NewPub(ctx, zmq4.WithLogger(quiet()))
	} else {
		// As vLLM's pyzmq socket does, a dialing publisher may start
		// before its subscriber is up: it dials until it connects, and
		// batches published meanwhile are lost to the live socket (PUB
		// drops them without a peer) and kept for replay. Unlike pyzmq it
		// does not redial a subscriber that restarts: zmq4's automatic
		// reconnect redials from inside a failed send, under the lock
		// the new connection needs.
		p.pub = zmq4.NewPub(ctx, zmq4.WithLogger(quiet()), zmq4.WithDialerMaxRetries(-1), zmq4.WithDialerRetry(dialRetry))
	}
	if err := p.pub.SetOption(zmq4.OptionHWM, cfg.HWM); err != nil {
		return fail(fmt.Errorf("kvevents: publisher hwm: %w", err))
	}
	if binds {
		if err := p.pub.Listen(ep); err != nil {
			return fail(fmt.Errorf("kvevents: publisher %s: %w", cfg.Endpoint, err))
		}
	} else {
		p.dialing = true
		go func() {
			defer close(p.dialed)
			// Dial retries until it connects or Close cancels it; a
			// failed handshake leaves the socket without a peer, as a
			// subscriber that never comes up does.
			_ = p.pub.Dial(ep)
		}()
	}
	if cfg.Replay != "" {
		rep, err := endpoint(cfg.Replay)
		if err != nil {
			return fail(err)
		}
		p.router = zmq4.NewRouter(ctx, zmq4.WithLogger(quiet()))
		if err := p.router.Listen(rep); err != nil {
			return fail(fmt.Errorf("kvevents: replay %s: %w", cfg.Replay, err))
		}
		go p.serveReplay()
	} else {
		close(p.done)
	}
	return p, nil
}

func publisherBinds(cfg PublisherConfig) bool {
	switch cfg.Mode {
	case Bind:
		return true
	case Connect:
		return false
	}
	rest := strings.TrimPrefix(cfg.Endpoint, "tcp://")
	host, _, _ := net.SplitHostPort(rest)
	return host == "*" || host == "::" || host == "0.0.0.0" || host == ""
}

// Addr is where the live socket listens (nil when it dials).
func (p *Publisher) Addr() net.Addr { return p.pub.Addr() }

// ReplayAddr is where the replay socket listens (nil without replay).
func (p *Publisher) ReplayAddr() net.Addr {
	if p.router == nil {
		return nil
	}
	return p.router.Addr()
}

// Seq returns the sequence number the next batch will have.
func (p *Publisher) Seq() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq
}

// Publish sends one batch of events (rank < 0: no data-parallel rank).
// It does not wait for subscribers: a slow one loses messages beyond the
// high-water mark and sees a gap.
func (p *Publisher) Publish(ts float64, events []Event, rank int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	payload := Encoder{Encoding: p.cfg.Encoding}.Payload(nil, ts, events, rank)
	seq := p.seq
	p.seq++
	if p.router != nil {
		r := replayed{seq: seq, payload: payload}
		if len(p.ring) < p.cfg.Buffer {
			p.ring = append(p.ring, r)
		} else {
			p.ring[seq%int64(p.cfg.Buffer)] = r
		}
	}
	return p.pub.Send(zmq4.NewMsgFrom([]byte(p.cfg.Topic), AppendSeq(nil, seq), payload))
}

// Skip advances the sequence without sending (tests: a lost message that
// replay can still serve, when it is kept).
func (p *Publisher) Skip(ts float64, events []Event, rank int, keep bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seq := p.seq
	p.seq++
	if p.router != nil {
		r := replayed{seq: seq} // no payload: a hole replay cannot serve
		if keep {
			r.payload = Encoder{Encoding: p.cfg.Encoding}.Payload(nil, ts, events, rank)
		}
		if len(p.ring) < p.cfg.Buffer {
			p.ring = append(p.ring, r)
		} else {
			p.ring[seq%int64(p.cfg.Buffer)] = r
		}
	}
}

// serveReplay answers replay requests [id, "", start_seq] with every
// buffered batch from start_seq on, then the end marker (seq -1).
func (p *Publisher) serveReplay() {
	defer close(p.done)
	for {
		msg, err := p.router.Recv()
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) || strings.Contains(err.Error(), "closed") {
				return
			}
			continue
		}
		if len(msg.Frames) != 3 || len(msg.Frames[1]) != 0 || len(msg.Frames[2]) != 8 {
			continue
		}
		id := msg.Frames[0]
		start, _ := SplitReplay([][]byte{{}, msg.Frames[2], {}})
		for _, r := range p.since(start.Seq) {
			frames := [][]byte{id, {}}
			if p.cfg.ReplayTopic {
				frames = append(frames, []byte(p.cfg.Topic))
			}
			frames = append(frames, AppendSeq(nil, r.seq), r.payload)
			if p.router.Send(zmq4.NewMsgFrom(frames...)) != nil {
				break
			}
		}
		_ = p.router.Send(zmq4.NewMsgFrom(id, []byte{}, AppendSeq(nil, -1), []byte{}))
	}
}

// since returns the buffered batches from seq from on, in order.
func (p *Publisher) since(from int64) []replayed {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []replayed
	first := p.seq - int64(len(p.ring))
	for s := max(from, first); s < p.seq; s++ {
		if r := p.ring[s%int64(p.cfg.Buffer)]; r.payload != nil {
			out = append(out, r)
		}
	}
	return out
}

// Close closes the sockets.
func (p *Publisher) Close() {
	p.cancel()
	if p.pub != nil {
		if p.dialing {
			<-p.dialed
		}
		p.pub.Close()
	}
	if p.router != nil {
		p.router.Close()
		<-p.done
	}
}

// dialRetry is how long a dialing publisher waits between attempts.
const dialRetry = 100 * time.Millisecond

func quiet() *log.Logger { return log.New(io.Discard, "", 0) }
