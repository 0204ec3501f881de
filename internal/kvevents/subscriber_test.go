package kvevents

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/tokenize"
)

// recorder is a Target that keeps each instance's index as a set, as the
// scheduler's exact view would.
type recorder struct {
	mu    sync.Mutex
	sets  map[string]map[uint64]bool
	exact map[string]bool
	clear map[string]int
}

func newRecorder() *recorder {
	return &recorder{sets: map[string]map[uint64]bool{}, exact: map[string]bool{}, clear: map[string]int{}}
}

func (r *recorder) Stored(id string, keys []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sets[id] == nil {
		r.sets[id] = map[uint64]bool{}
	}
	for _, k := range keys {
		r.sets[id][k] = true
	}
}

func (r *recorder) Removed(id string, keys []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		delete(r.sets[id], k)
	}
}

func (r *recorder) Cleared(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sets, id)
	r.clear[id]++
}

func (r *recorder) SetExact(id string, exact bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exact[id] = exact
}

// state returns id's index, sorted, and whether it is exact.
func (r *recorder) state(id string) ([]uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []uint64
	for k := range r.sets[id] {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, r.exact[id]
}

// engine models an engine's cache with its own block hash (SHA-256 of the
// parent hash and the tokens, low 64 bits, as vLLM's default), which the
// router cannot compute: it must key blocks by their tokens.
type engine struct {
	pub *Publisher
	bs  int
}

func engineHash(parent uint64, toks []uint32) uint64 {
	h := sha256.New()
	binary.Write(h, binary.LittleEndian, parent)
	binary.Write(h, binary.LittleEndian, toks)
	return binary.BigEndian.Uint64(h.Sum(nil)[24:])
}

// store returns the BlockStored event of a prompt's full blocks and the
// engine hashes.
func (e *engine) store(toks []uint32) (Event, []uint64) {
	var hs []uint64
	parent := uint64(0)
	n := len(toks) / e.bs
	for i := 0; i < n; i++ {
		parent = engineHash(parent, toks[i*e.bs:(i+1)*e.bs])
		hs = append(hs, parent)
	}
	return Event{Kind: BlockStored, Hashes: hs, Tokens: toks[:n*e.bs], BlockSize: e.bs}, hs
}

func (e *engine) publish(t *testing.T, evs ...Event) {
	t.Helper()
	if err := e.pub.Publish(float64(time.Now().UnixNano())/1e9, evs, -1); err != nil {
		t.Fatal(err)
	}
}

// routerKeys is what the router computes for a request with these tokens.
func routerKeys(toks []uint32, bs int) []uint64 {
	k := tokenize.Blocks(toks[:len(toks)/bs*bs], bs, nil)
	slices.Sort(k)
	return k
}

// eventually polls cond until it holds or the deadline passes, publishing
// an empty batch each round when e is set (so that a subscriber that has
// not joined yet sees a message once it has).
func eventually(t *testing.T, e *engine, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		if e != nil {
			e.publish(t)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

func newEngine(t *testing.T, addr string, replay bool, enc Encoding) *engine {
	t.Helper()
	cfg := PublisherConfig{Endpoint: "tcp://" + addr, Mode: Bind, Encoding: enc, Topic: "kv@x@m", ReplayTopic: enc == Maps}
	if replay {
		cfg.Replay = "tcp://127.0.0.1:0"
	}
	p, err := NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &engine{pub: p, bs: 4}
}

func portOf(a net.Addr) int { return a.(*net.TCPAddr).Port }

// run starts a subscriber and stops it at the test's end.
func run(t *testing.T, cfg Config, members []string, target Target) *Subscriber {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func() []string { return members }, target) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run() = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run() did not return within 10s of its context's end")
		}
	})
	return s
}

func prompt(n int, base uint32) []uint32 { return u32s(n, base) }

// TestConnectReplayRemoveRestart: a subscriber that joins late is brought
// up to date by replay; the router's keys are its own hash of the tokens;
// BlockRemoved is mapped through the engine's hashes; a restarted
// publisher (sequence back to 0) purges what the instance held.
func TestConnectReplayRemoveRestart(t *testing.T) {
	for _, enc := range []Encoding{Arrays, Maps} {
		t.Run(fmt.Sprint(enc), func(t *testing.T) {
			e := newEngine(t, "127.0.0.1:0", true, enc)
			a, b := prompt(16, 100), prompt(12, 900)
			ev, _ := e.store(a)
			e.publish(t, ev) // seq 0: before anyone listens
			id := "127.0.0.1:8000"
			rec := newRecorder()
			run(t, Config{Pool: "p", Port: portOf(e.pub.Addr()), ReplayPort: portOf(e.pub.ReplayAddr()), BlockSize: 4, Refresh: 50 * time.Millisecond}, []string{id}, rec)
			eventually(t, e, "replayed blocks of the first prompt, exact view", func() bool {
				got, exact := rec.state(id)
				return exact && slices.Equal(got, routerKeys(a, 4))
			})
			evb, hb := e.store(b)
			e.publish(t, evb)
			want := slices.Sorted(slices.Values(append(routerKeys(a, 4), routerKeys(b, 4)...)))
			eventually(t, nil, "both prompts", func() bool { got, _ := rec.state(id); return slices.Equal(got, want) })
			e.publish(t, Event{Kind: BlockRemoved, Hashes: hb[1:]})
			want = slices.Sorted(slices.Values(append(routerKeys(a, 4), routerKeys(b[:4], 4)...)))
			eventually(t, nil, "b's last two blocks removed", func() bool { got, _ := rec.state(id); return slices.Equal(got, want) })

			// Restart: a new process on the same ports, numbering from 0.
			port, rport := portOf(e.pub.Addr()), portOf(e.pub.ReplayAddr())
			e.pub.Close()
			e2 := newEngineAt(t, port, rport, enc)
			c := prompt(8, 5000)
			evc, _ := e2.store(c)
			e2.publish(t, evc)
			eventually(t, e2, "after the restart only the new prompt", func() bool {
				got, exact := rec.state(id)
				return exact && slices.Equal(got, routerKeys(c, 4))
			})
		})
	}
}

func newEngineAt(t *testing.T, port, rport int, enc Encoding) *engine {
	t.Helper()
	var e *engine
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		var p *Publisher
		p, err = NewPublisher(PublisherConfig{Endpoint: "tcp://127.0.0.1:" + strconv.Itoa(port), Mode: Bind, Replay: "tcp://127.0.0.1:" + strconv.Itoa(rport), Encoding: enc})
		if err == nil {
			t.Cleanup(p.Close)
			e = &engine{pub: p, bs: 4}
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted publisher: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // the old listener's port being released
	}
}

// TestGapRepairedOrFallback: a lost message that replay still has is
// repaired; one it lost too makes the instance fall back to the
// prediction, until the engine clears its cache.
func TestGapRepairedOrFallback(t *testing.T) {
	e := newEngine(t, "127.0.0.1:0", true, Maps)
	id := "127.0.0.1:8000"
	rec := newRecorder()
	run(t, Config{Pool: "p", Port: portOf(e.pub.Addr()), ReplayPort: portOf(e.pub.ReplayAddr()), BlockSize: 4}, []string{id}, rec)
	eventually(t, e, "exact view", func() bool { _, exact := rec.state(id); return exact })

	a := prompt(8, 100)
	ev, _ := e.store(a)
	e.pub.Skip(1, []Event{ev}, -1, true) // lost on the live socket, kept for replay
	e.publish(t)
	eventually(t, nil, "the skipped batch replayed", func() bool {
		got, exact := rec.state(id)
		return exact && slices.Equal(got, routerKeys(a, 4))
	})

	b := prompt(8, 700)
	evb, _ := e.store(b)
	e.pub.Skip(1, []Event{evb}, -1, false) // lost for good
	e.publish(t)
	eventually(t, nil, "fallback to the prediction", func() bool { _, exact := rec.state(id); return !exact })

	e.publish(t, Event{Kind: AllBlocksCleared})
	eventually(t, nil, "exact again and empty after AllBlocksCleared", func() bool {
		got, exact := rec.state(id)
		return exact && len(got) == 0
	})
}

// TestNoReplayLateJoin: without replay a subscriber that missed the start
// keeps the prediction (the events still correct it).
func TestNoReplayLateJoin(t *testing.T) {
	e := newEngine(t, "127.0.0.1:0", false, Arrays)
	e.pub.Skip(1, nil, -1, false) // seq 0, missed
	id := "127.0.0.1:8000"
	rec := newRecorder()
	run(t, Config{Pool: "p", Port: portOf(e.pub.Addr()), BlockSize: 4}, []string{id}, rec)
	a := prompt(8, 100)
	ev, _ := e.store(a)
	eventually(t, e, "stored blocks applied", func() bool {
		e.publish(t, ev)
		got, _ := rec.state(id)
		return slices.Equal(got, routerKeys(a, 4))
	})
	if _, exact := rec.state(id); exact {
		t.Error("exact view without the stream's start or replay")
	}
}

// TestBindTopicsAndBlockSize: in bind mode publishers dial the router and
// their topic names the instance; an engine with another block size is
// refused.
func TestBindTopicsAndBlockSize(t *testing.T) {
	rec := newRecorder()
	good, bad := "127.0.0.1:8001", "127.0.0.1:8002"
	s := run(t, Config{Pool: "p", Mode: Bind, Bind: "tcp://127.0.0.1:0", BlockSize: 4}, []string{good, bad}, rec)
	ready, addr := s.Listening()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("bind mode not listening within 10s")
	}
	dial := func(inst string, bs int) *engine {
		p, err := NewPublisher(PublisherConfig{Endpoint: "tcp://" + addr().String(), Mode: Connect, Topic: "kv@" + inst + "@model", Encoding: Maps})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return &engine{pub: p, bs: bs}
	}
	eg, eb := dial(good, 4), dial(bad, 8)
	a := prompt(16, 1)
	evg, _ := eg.store(a)
	evb, _ := eb.store(a)
	eventually(t, nil, "the good engine's blocks, exact; the other's refused", func() bool {
		eg.publish(t, Event{Kind: AllBlocksCleared}, evg)
		eb.publish(t, Event{Kind: AllBlocksCleared}, evb)
		g, ge := rec.state(good)
		b, be := rec.state(bad)
		return ge && slices.Equal(g, routerKeys(a, 4)) && !be && len(b) == 0
	})
}

// TestOversizedFrameRefused: a peer announcing a frame beyond the bound
// is disconnected before anything is allocated for it, and the socket
// goes on serving others.
func TestOversizedFrameRefused(t *testing.T) {
	rec := newRecorder()
	id := "127.0.0.1:8001"
	s := run(t, Config{Pool: "p", Mode: Bind, Bind: "tcp://127.0.0.1:0", BlockSize: 4}, []string{id}, rec)
	ready, addr := s.Listening()
	<-ready
	c, err := net.Dial("tcp", addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	greeting := make([]byte, 64)
	greeting[0], greeting[9], greeting[10] = 0xff, 0x7f, 3
	copy(greeting[12:], "NULL")
	hdr := []byte{0x02, 0, 0, 0x10, 0, 0, 0, 0, 0} // a long frame of 2^44 bytes
	c.Write(append(greeting, hdr...))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("connection with an oversized frame still open after 10s")
			}
			break // closed by the subscriber
		}
	}
	p, err := NewPublisher(PublisherConfig{Endpoint: "tcp://" + addr().String(), Mode: Connect, Topic: "kv@" + id + "@m"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	e := &engine{pub: p, bs: 4}
	eventually(t, nil, "a well-behaved publisher still heard", func() bool {
		e.publish(t, Event{Kind: AllBlocksCleared})
		_, exact := rec.state(id)
		return exact
	})
}

func TestInstanceEndpoint(t *testing.T) {
	tests := []struct {
		id                 string
		port, offset, rank int
		want               string
	}{
		{"10.0.0.1:8000", 5557, 0, 0, "tcp://10.0.0.1:5557"},
		{"10.0.0.1:8000", 5557, 0, 2, "tcp://10.0.0.1:5559"},
		{"10.0.0.1:8000", 5557, 100, 1, "tcp://10.0.0.1:8101"},
		{"[::1]:8000", 5557, 0, 0, "tcp://[::1]:5557"},
		{"10.0.0.1:65535", 0, 1, 0, ""},
		{"nohost", 5557, 0, 0, ""},
	}
	for _, tt := range tests {
		got, err := instanceEndpoint(tt.id, tt.port, tt.offset, tt.rank)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("instanceEndpoint(%q, %d, %d, %d) = %q, %v, want %q", tt.id, tt.port, tt.offset, tt.rank, got, err, tt.want)
		}
	}
}

// TestRestartHiddenBySequence: a restarted publisher whose sequence has
// already gone past the old one's last number by the time the subscriber
// re-dials looks like a continuation; the replay socket, which no longer
// has the last batch applied, gives it away, and the instance is purged.
func TestRestartHiddenBySequence(t *testing.T) {
	e := newEngine(t, "127.0.0.1:0", true, Maps)
	id := "127.0.0.1:8000"
	rec := newRecorder()
	run(t, Config{Pool: "p", Port: portOf(e.pub.Addr()), ReplayPort: portOf(e.pub.ReplayAddr()), BlockSize: 4}, []string{id}, rec)
	a := prompt(8, 100)
	ev, _ := e.store(a)
	eventually(t, e, "the first engine's blocks", func() bool {
		got, exact := rec.state(id)
		if exact && len(got) == 0 {
			e.publish(t, ev)
		}
		return exact && slices.Equal(got, routerKeys(a, 4))
	})
	last := e.pub.Seq() - 1
	port, rport := portOf(e.pub.Addr()), portOf(e.pub.ReplayAddr())
	e.pub.Close()
	e2 := newEngineAt(t, port, rport, Maps)
	for e2.pub.Seq() <= last { // the new process is already past the old one's last batch
		e2.pub.Skip(float64(e2.pub.Seq())+0.5, nil, -1, true)
	}
	c := prompt(8, 5000)
	evc, _ := e2.store(c)
	e2.publish(t, evc)
	eventually(t, e2, "only the new process's blocks", func() bool {
		got, exact := rec.state(id)
		return exact && slices.Equal(got, routerKeys(c, 4))
	})
}

// A first block whose parent is 0 (llm-d's simulator's array encoding)
// is a root; a publisher numbering from 1 with replay is whole from its
// first batch.
func TestParentZeroAndSequenceFromOne(t *testing.T) {
	e := newEngine(t, "127.0.0.1:0", true, Arrays)
	e.pub.Skip(0, nil, -1, false) // seq 0 never exists: the publisher numbers from 1
	a := prompt(8, 100)
	ev, _ := e.store(a)
	ev.HasParent, ev.Parent = true, 0
	e.publish(t, ev) // seq 1, before anyone listens: replay brings it
	id := "127.0.0.1:8000"
	rec := newRecorder()
	run(t, Config{Pool: "p", Port: portOf(e.pub.Addr()), ReplayPort: portOf(e.pub.ReplayAddr()), BlockSize: 4}, []string{id}, rec)
	eventually(t, e, "the root blocks, exact", func() bool {
		got, exact := rec.state(id)
		return exact && slices.Equal(got, routerKeys(a, 4))
	})
}

// TestDialBeforeSubscriber: an engine that dials (bind mode on the
// router's side) may start before the router listens, as vLLM's may: the
// publisher keeps dialing instead of failing, and once the router binds
// its batches arrive.
func TestDialBeforeSubscriber(t *testing.T) {
	addr := unusedAddr(t) // nothing listens there until the subscriber binds
	id := "127.0.0.1:8001"
	p, err := NewPublisher(PublisherConfig{Endpoint: "tcp://" + addr, Mode: Connect, Topic: "kv@" + id + "@m", Encoding: Maps})
	if err != nil {
		t.Fatalf("NewPublisher with no subscriber up: %v", err)
	}
	t.Cleanup(p.Close)
	e := &engine{pub: p, bs: 4}
	a := prompt(16, 7)
	ev, _ := e.store(a)
	e.publish(t, ev)                   // lost to the live socket: no peer yet
	time.Sleep(300 * time.Millisecond) // let a few dial attempts fail first
	rec := newRecorder()
	s := run(t, Config{Pool: "p", Mode: Bind, Bind: "tcp://" + addr, BlockSize: 4}, []string{id}, rec)
	ready, _ := s.Listening()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("bind mode not listening within 10s")
	}
	eventually(t, nil, "the dialing engine's blocks, once the router listens", func() bool {
		e.publish(t, Event{Kind: AllBlocksCleared}, ev)
		got, exact := rec.state(id)
		return exact && slices.Equal(got, routerKeys(a, 4))
	})
}

// TestDialingPublisherCloses: Close ends a publisher that is still
// dialing a subscriber that never comes up.
func TestDialingPublisherCloses(t *testing.T) {
	addr := unusedAddr(t)
	p, err := NewPublisher(PublisherConfig{Endpoint: "tcp://" + addr, Mode: Connect})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s while dialing")
	}
}

// unusedAddr returns a loopback address that nothing listens on (one the
// kernel just gave out and that was closed again).
func unusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
