package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/state"
	"github.com/dualmap/dualmap/scheduler"
)

type nopObserver struct{}

func (nopObserver) Tokenized(*scheduler.Request, error) {}

func chat(t *testing.T, content string) *openai.Request {
	t.Helper()
	b, err := openai.Parse("POST", "/v1/chat/completions", "application/json",
		[]byte(`{"model":"m","messages":[{"role":"user","content":"`+content+`"}]}`), openai.Limits{MaxBodyBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assertIdle fails unless no instance of p holds load.
func assertIdle(t *testing.T, p *Pool) {
	t.Helper()
	for _, st := range p.Instances() {
		if st.Running != 0 || st.PendingTokens != 0 || st.QueuedTokens != 0 || st.Queued != 0 {
			t.Errorf("%s holds load: running %d, pending %d, queued %d (%d tokens)", st.ID, st.Running, st.PendingTokens, st.Queued, st.QueuedTokens)
		}
	}
}

func running(p *Pool) int {
	n := 0
	for _, st := range p.Instances() {
		n += st.Running
	}
	return n
}

// The ticket releases the request's load on every path the protocol can
// take, exactly once, and attributes health as the response says.
func TestTicketReleasesOnEveryPath(t *testing.T) {
	tests := []struct {
		name string
		use  func(tk *Ticket) // what the protocol reports before Done
		down string           // the instance taken out: "primary", "fallback" or ""
	}{
		{"success", func(tk *Ticket) { tk.Responded(200, "", true); tk.FirstToken() }, ""},
		{"engine 4xx", func(tk *Ticket) { tk.Responded(400, "", true) }, ""},
		{"engine 503", func(tk *Ticket) { tk.Responded(503, "", true) }, "primary"},
		{"engine 500: one of health.consecutive_5xx", func(tk *Ticket) { tk.Responded(500, "", true) }, ""},
		{"client cancel before the response", func(*Ticket) {}, ""},
		{"stream error after the first token", func(tk *Ticket) { tk.Responded(200, "", true); tk.FirstToken() }, ""},
		{"served elsewhere", func(tk *Ticket) { tk.Responded(200, tk.Decision().Fallback, true) }, "primary"},
		{"fallback answered 5xx", func(tk *Ticket) { tk.Responded(502, tk.Decision().Fallback, true) }, "both"},
		{"stranger served", func(tk *Ticket) { tk.Responded(200, "6.6.6.6:80", true) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := startManager(t, parseConfig(t, fourInstances), false, Options{})
			p := m.Pools()[0]
			tk, err := p.Route(context.Background(), chat(t, "hello "+tt.name), Controls{SLO: time.Second}, nopObserver{})
			if err != nil {
				t.Fatal(err)
			}
			if n := running(p); n != 1 {
				t.Fatalf("running after Route = %d, want 1", n)
			}
			tt.use(tk)
			tk.Done()
			tk.Done() // a second Done releases nothing more
			tk.FirstToken()
			assertIdle(t, p)
			dec := tk.Decision()
			down := map[string]bool{}
			for _, id := range p.Addresses() {
				down[id] = p.HealthOf(id).Down
			}
			want := map[string]bool{}
			for _, id := range p.Addresses() {
				want[id] = false
			}
			switch tt.down {
			case "primary":
				want[dec.Instance] = true
			case "both":
				want[dec.Instance], want[dec.Fallback] = true, true
			}
			if fmt.Sprint(down) != fmt.Sprint(want) {
				t.Errorf("down = %v, want %v (pinned %s, fallback %s)", down, want, dec.Instance, dec.Fallback)
			}
		})
	}
}

// A request served by the fallback is recorded as cached there: the next
// request with the same prompt is predicted to hit it.
func TestServedElsewhereRecordsCache(t *testing.T) {
	m := startManager(t, parseConfig(t, fourInstances), false, Options{})
	p := m.Pools()[0]
	body := chat(t, "a prompt long enough to fill a block or two of tokens for the prefix index; "+
		"a prompt long enough to fill a block or two of tokens for the prefix index")
	tk, err := p.Route(context.Background(), body, Controls{}, nopObserver{})
	if err != nil {
		t.Fatal(err)
	}
	fb := tk.Decision().Fallback
	if got := tk.Responded(200, fb, true); got != fb {
		t.Fatalf("Responded(200, fallback) = %q, want %q", got, fb)
	}
	tk.Done()
	r, err := p.Tokenize(body, Controls{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Blocks) == 0 {
		t.Fatal("the prompt has no block: the test checks nothing")
	}
	d, err := p.Scheduler().(*scheduler.Scheduler).Pick(r)
	if err != nil {
		t.Fatal(err)
	}
	if d.Instance != fb || d.CachedTokens == 0 {
		t.Errorf("Pick() after the fallback served = %s with %d cached tokens, want %s with the prompt cached", d.Instance, d.CachedTokens, fb)
	}
}

// Route holds nothing on its error paths: a tokenizer error, shedding, a
// cancelled context.
func TestRouteErrorsHoldNothing(t *testing.T) {
	m := startManager(t, parseConfig(t, fourInstances), false, Options{})
	p := m.Pools()[0]
	for _, id := range p.Addresses() {
		p.SetHealthy(id, false)
	}
	if _, err := p.Route(context.Background(), chat(t, "x"), Controls{}, nopObserver{}); !errors.Is(err, scheduler.ErrNoEndpoint) {
		t.Errorf("Route() with every instance down = %v, want ErrNoEndpoint", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Route(ctx, chat(t, "y"), Controls{}, nopObserver{}); err == nil {
		t.Errorf("Route() with a cancelled context = nil error")
	}
	assertIdle(t, p)
}

// Failures during one outage do not escalate the backoff; a failure after
// the instance came back (flapping) doubles it.
func TestBackoffEscalatesOnFlapsOnly(t *testing.T) {
	m := startManager(t, parseConfig(t, fourInstances+"health: {backoff: 2s, max_backoff: 1m}\n"), false, Options{})
	p := m.Pools()[0]
	id := "10.0.0.1:8000"
	for i := 0; i < 6; i++ { // six requests in flight fail in one outage
		p.failed(id)
	}
	if b := p.HealthOf(id).Backoff; b != 2*time.Second {
		t.Fatalf("backoff after one outage = %v, want 2s", b)
	}
	p.mu.Lock()
	p.healthOf(id).down = false // the health check brought it back
	p.mu.Unlock()
	p.failed(id)
	if b := p.HealthOf(id).Backoff; b != 4*time.Second {
		t.Errorf("backoff after a flap = %v, want 4s", b)
	}
	for _, st := range p.Instances() {
		if st.ID == id && st.Healthy {
			t.Error("failed instance still healthy in the scheduler")
		}
	}
	if got := m.metricValues(t)["dualmap_upstream_errors_total{instance=10.0.0.1:8000,pool=default}"]; got != 7 {
		t.Errorf("upstream errors counted = %v, want 7", got)
	}
}

// recordingStore is a pool's shared store that keeps the dispatch records
// it is given (the memory store drops them).
type recordingStore struct {
	state.Store
	mu   sync.Mutex
	recs []coord.Record
}

func (r *recordingStore) Dispatched(instance string, blocks []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, coord.Record{Instance: instance, Blocks: slices.Clone(blocks)})
	r.Store.Dispatched(instance, blocks)
}

func (r *recordingStore) records() []coord.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}

// The dispatch reaches the shared store for the other replicas, and so
// does the record of another member that served (not only this router's
// KV index); a stranger that served is recorded nowhere.
func TestServedElsewhereReachesSharedStore(t *testing.T) {
	for _, tt := range []struct {
		name   string
		served string // "other": a pool member that is not the pinned one
		want   bool
	}{
		{"another member", "other", true},
		{"a stranger", "6.6.6.6:80", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := startManager(t, parseConfig(t, fourInstances), false, Options{})
			p := m.Pools()[0]
			rs := &recordingStore{Store: p.store}
			p.store = rs
			var err error
			if p.coord, err = newCoordinator(m.cfg, p, m.tick, m.now); err != nil {
				t.Fatal(err)
			}
			tk, err := p.Route(context.Background(), chat(t, "a prompt long enough to fill a block of the prefix index "+tt.name), Controls{}, nopObserver{})
			if err != nil {
				t.Fatal(err)
			}
			defer tk.Done()
			pinned := tk.Decision().Instance
			recs := rs.records()
			if len(recs) != 1 || recs[0].Instance != pinned || len(recs[0].Blocks) == 0 {
				t.Fatalf("store records after routing = %+v, want one for the pinned %s", recs, pinned)
			}
			served := tt.served
			if served == "other" {
				served = "10.0.0.1:8000"
				if pinned == served {
					served = "10.0.0.2:8000"
				}
			}
			tk.Responded(200, served, true)
			got := rs.records()[1:]
			switch {
			case !tt.want && len(got) != 0:
				t.Errorf("a stranger's serving reached the store: %+v", got)
			case tt.want && (len(got) != 1 || got[0].Instance != served || !slices.Equal(got[0].Blocks, recs[0].Blocks)):
				t.Errorf("store records after %s served = %+v, want one for it with the prompt's %d blocks", served, got, len(recs[0].Blocks))
			}
		})
	}
}

// Other 5xx than 502-504 take an instance out only health.consecutive_5xx
// in a row: a success in between starts the count again; 502, 503 and 504
// take it out at once. Every 5xx is counted as an upstream error.
func TestConsecutive5xxTakeOut(t *testing.T) {
	tests := []struct {
		name     string
		cfg      string
		statuses []int // answers of one instance, in order
		down     bool
	}{
		{"two 500s of three", "", []int{500, 500}, false},
		{"three 500s", "", []int{500, 500, 500}, true},
		{"a success between", "", []int{500, 500, 200, 500, 500}, false},
		{"501 and 505 count", "", []int{501, 505, 500}, true},
		{"503 at once", "", []int{503}, true},
		{"504 at once", "", []int{504}, true},
		{"502 at once", "", []int{502}, true},
		{"4xx is no failure", "", []int{500, 500, 429, 404}, false},
		{"consecutive_5xx 1: the first 500", "health: {consecutive_5xx: 1}\n", []int{500}, true},
		{"consecutive_5xx 5: four 500s", "health: {consecutive_5xx: 5}\n", []int{500, 500, 500, 500}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := startManager(t, parseConfig(t, fourInstances+tt.cfg), false, Options{})
			p := m.Pools()[0]
			var id string
			for i, st := range tt.statuses {
				tk, err := p.Route(context.Background(), chat(t, fmt.Sprintf("hello %d", i)), Controls{SLO: time.Second}, nopObserver{})
				if err != nil {
					t.Fatal(err)
				}
				if id == "" {
					id = tk.Decision().Instance
				}
				// Every answer is charged to one instance, whichever the
				// router picked: the proxy reports it as the one that served.
				tk.Responded(st, id, true)
				tk.Done()
			}
			if got := p.HealthOf(id).Down; got != tt.down {
				t.Errorf("after %v: down = %v, want %v", tt.statuses, got, tt.down)
			}
			n5 := 0
			for _, st := range tt.statuses {
				if st >= 500 {
					n5++
				}
			}
			if got := m.metricValues(t)["dualmap_upstream_errors_total{instance="+id+",pool=default}"]; int(got) != n5 {
				t.Errorf("upstream errors counted = %v, want %d", got, n5)
			}
		})
	}
}
