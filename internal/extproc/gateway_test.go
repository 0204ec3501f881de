package extproc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/internal/state"
	"github.com/dualmap/dualmap/scheduler"
)

// withMetadata sets one filter metadata value on m.
func withMetadata(m *extprocv3.ProcessingRequest, ns, key string, v *structpb.Value) *extprocv3.ProcessingRequest {
	m.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		ns: {Fields: map[string]*structpb.Value{key: v}},
	}}
	return m
}

func subsetMsg(m *extprocv3.ProcessingRequest, v *structpb.Value) *extprocv3.ProcessingRequest {
	return withMetadata(m, subsetNamespace, subsetKey, v)
}

func listValue(s ...string) *structpb.Value {
	var vs []*structpb.Value
	for _, x := range s {
		vs = append(vs, structpb.NewStringValue(x))
	}
	return structpb.NewListValue(&structpb.ListValue{Values: vs})
}

// pinOf returns the pin of a routed answer (buffered: the body answer;
// full duplex: the held headers answer) and its envoy.lb metadata.
func pinAndMetadata(r *extprocv3.ProcessingResponse) (header, metadata string) {
	m := r.GetRequestBody().GetResponse().GetHeaderMutation()
	if r.GetRequestHeaders() != nil {
		m = r.GetRequestHeaders().GetResponse().GetHeaderMutation()
	}
	return setHeader(m, "x-gateway-destination-endpoint"),
		r.GetDynamicMetadata().GetFields()["envoy.lb"].GetStructValue().GetFields()["x-gateway-destination-endpoint"].GetStringValue()
}

// sendRequest sends one chat with the given metadata value for the subset
// hint (nil: none), buffered or full duplex, and returns the routing answer.
func sendRequest(t *testing.T, ts *testServer, c *call, duplex bool, hint *structpb.Value, body string, extra ...string) *extprocv3.ProcessingResponse {
	t.Helper()
	kv := append(append([]string{}, duplexPost...), extra...)
	h := reqHeadersMsg(false, kv...)
	if duplex {
		h = duplexHeaders(false, kv...)
	}
	if hint != nil {
		subsetMsg(h, hint)
	}
	if !duplex {
		if r := c.send(t, h); r.GetRequestHeaders() == nil {
			return r // an immediate response
		}
		return c.body(t, body)
	}
	c.push(t, h)
	if err := c.stream.Send(reqBodyMsg(body, true)); err != nil {
		t.Logf("body not sent: %v", err) // the stream ended after an immediate answer
	}
	r := c.recv(t)
	if r.GetRequestHeaders() != nil {
		readEcho(t, c, len(body))
	}
	return r
}

// The gateway's subset hint, as a list or a comma-separated string, in
// both body modes: every request is pinned inside it, in the header and
// the envoy.lb metadata alike; a hint that is empty, names no pool member,
// names only instances that are down, or is of another type gets 503 with
// the reason header.
func TestSubsetHint(t *testing.T) {
	cfg := parseConfig(t, fourInstances)
	cfg.Routing.Mode = config.ModeOriginalDst
	ts := start(t, cfg, false)
	allowed := []string{"10.0.0.2:8000", "10.0.0.4:8000"}
	for _, duplex := range []bool{false, true} {
		for _, tt := range []struct {
			name string
			hint *structpb.Value
		}{
			{"list", listValue(allowed...)},
			{"comma string", structpb.NewStringValue(" 10.0.0.2:8000,10.0.0.4:8000 ")},
			{"list with a stranger", listValue("10.0.0.2:8000", "10.9.9.9:1", "10.0.0.4:8000")},
		} {
			t.Run(fmt.Sprintf("%s duplex=%v", tt.name, duplex), func(t *testing.T) {
				seen := map[string]bool{}
				for i := 0; i < 24; i++ {
					c := ts.open(t)
					r := sendRequest(t, ts, c, duplex, tt.hint, uniqueChat(fmt.Sprintf("%s %v %d", tt.name, duplex, i)))
					h, md := pinAndMetadata(r)
					if !slices.Contains(allowed, h) || md != h {
						t.Fatalf("pin = %q, metadata %q; want one of %v in both (answer %v)", h, md, allowed, r)
					}
					seen[h] = true
					c.close()
				}
				if len(seen) != 2 {
					t.Errorf("24 varied prompts went to %v, want both allowed instances", seen)
				}
			})
		}
		t.Run(fmt.Sprintf("GET duplex=%v", duplex), func(t *testing.T) {
			for i := 0; i < 8; i++ {
				c := ts.open(t)
				h := subsetMsg(reqHeadersMsg(true, ":method", "GET", ":path", "/v1/models"), listValue("10.0.0.3:8000"))
				if duplex {
					h.ProtocolConfig = duplexConfig
				}
				if got, _ := pinAndMetadata(c.send(t, h)); got != "10.0.0.3:8000" {
					t.Fatalf("GET pinned to %q, want the subset's 10.0.0.3:8000", got)
				}
				c.close()
			}
		})
	}
	ts.srv.setHealthy(ts.srv.pools[0], "10.0.0.2:8000", false)
	ts.srv.setHealthy(ts.srv.pools[0], "10.0.0.4:8000", false)
	for _, duplex := range []bool{false, true} {
		for _, tt := range []struct {
			name string
			hint *structpb.Value
			kind string
		}{
			{"empty list", listValue(), "subset"},
			{"empty string", structpb.NewStringValue(" , "), "subset"},
			{"strangers only", listValue("10.9.9.9:1"), "no_endpoint"},
			{"members down", listValue(allowed...), "no_endpoint"},
			{"a number", structpb.NewNumberValue(3), "subset"},
			{"a list of numbers", structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(1)}}), "subset"},
			{"an overlong entry", structpb.NewStringValue(strings.Repeat("1", 100)), "subset"},
		} {
			t.Run(fmt.Sprintf("%s duplex=%v", tt.name, duplex), func(t *testing.T) {
				c := ts.open(t)
				defer c.close()
				im := sendRequest(t, ts, c, duplex, tt.hint, chat("m", "x", false)).GetImmediateResponse()
				if im == nil || im.GetStatus().GetCode() != 503 {
					t.Fatalf("answer = %v, want 503", im)
				}
				if got := setHeader(im.GetHeaders(), droppedHeader); got != tt.kind {
					t.Errorf("%s = %q, want %q", droppedHeader, got, tt.kind)
				}
			})
		}
	}
}

// The proxy's report of the endpoint that served (metadata_context
// envoy.lb / x-gateway-destination-endpoint-served) wins over the route
// header: another member that served takes the prompt into its KV index,
// and the pinned instance is taken out; a report naming a stranger is
// ignored.
func TestServedEndpointMetadata(t *testing.T) {
	for _, tt := range []struct {
		name       string
		served     string
		header     string // x-dualmap-upstream-host
		wantKV     bool   // the other instance got the prompt's KV
		wantPinned bool   // the pinned instance stays in service
		wantSource string // dualmap_served_reports_total's source
	}{
		{"the pinned instance", "", "", false, true, servedFromNone},
		{"the pinned instance, by metadata", "pinned", "", false, true, servedFromMetadata},
		{"another member", "other", "", true, false, servedFromMetadata},
		{"another member, the header says the pinned one", "other", "pinned", true, false, servedFromMetadata},
		{"no metadata, the header says another member", "", "other", true, false, servedFromHeader},
		{"a stranger", "6.6.6.6:80", "", false, true, servedFromMetadata},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := start(t, parseConfig(t, fourInstances), false)
			c := ts.open(t)
			defer c.close()
			r := ts.post(t, c, "/v1/chat/completions", chat("m", tt.name, false))
			pinned, _ := pinAndMetadata(r)
			pinned = strings.Split(pinned, ",")[0]
			other := "10.0.0.1:8000"
			if pinned == other {
				other = "10.0.0.2:8000"
			}
			resolve := func(s string) string {
				switch s {
				case "other":
					return other
				case "pinned":
					return pinned
				}
				return s
			}
			kv := []string{":status", "200"}
			if h := resolve(tt.header); h != "" {
				kv = append(kv, upstreamHostHeader, h)
			}
			m := respHeadersMsg(false, kv...)
			if s := resolve(tt.served); s != "" {
				withMetadata(m, servedNamespace, servedKey, structpb.NewStringValue(s))
			}
			before := instanceState(ts, other).CachedBlocks
			c.send(t, m)
			if got := instanceState(ts, other).CachedBlocks > before; got != tt.wantKV {
				t.Errorf("%s KV index grew = %v, want %v", other, got, tt.wantKV)
			}
			if got := instanceState(ts, pinned).Healthy; got != tt.wantPinned {
				t.Errorf("pinned %s healthy = %v, want %v", pinned, got, tt.wantPinned)
			}
			for _, src := range []string{servedFromMetadata, servedFromHeader, servedFromNone} {
				want := 0.0
				if src == tt.wantSource {
					want = 1
				}
				if got := testutil.ToFloat64(ts.srv.m.servedReports.WithLabelValues(ts.srv.pools[0].name, src)); got != want {
					t.Errorf("dualmap_served_reports_total{source=%q} = %v, want %v", src, got, want)
				}
			}
		})
	}
}

func instanceState(ts *testServer, id string) (out struct {
	Healthy      bool
	CachedBlocks int
}) {
	for _, st := range ts.srv.pools[0].sched.Instances() {
		if st.ID == id {
			out.Healthy, out.CachedBlocks = st.Healthy, st.CachedBlocks
		}
	}
	return out
}

// Data-parallel pools: instances that share an IP on several ports are
// routed, pinned and hinted by ip:port.
func TestDataParallelPorts(t *testing.T) {
	ts := start(t, parseConfig(t, `
pools:
  - instances:
      - address: 10.0.0.1:8000
      - address: 10.0.0.1:8001
      - address: 10.0.0.1:8002
      - address: 10.0.0.2:8000
routing: {mode: original-dst}
`), false)
	seen := map[string]bool{}
	for i := 0; i < 40; i++ {
		c := ts.open(t)
		h, _ := pinAndMetadata(ts.post(t, c, "/v1/chat/completions", uniqueChat(fmt.Sprint("dp ", i))))
		seen[h] = true
		c.responseHeaders(t, "200")
		c.close()
	}
	if !seen["10.0.0.1:8001"] || !seen["10.0.0.1:8002"] {
		t.Errorf("40 prompts went to %v, want the ports of 10.0.0.1 used apart", seen)
	}
	c := ts.open(t)
	defer c.close()
	if h, _ := pinAndMetadata(sendRequest(t, ts, c, true, listValue("10.0.0.1:8002"), chat("m", "hinted", false))); h != "10.0.0.1:8002" {
		t.Errorf("hinted to 10.0.0.1:8002, pinned %q", h)
	}
}

// x-llm-d-inference-objective (or x-gateway-inference-objective) sets the
// request's priority from objectives: in a saturated pool the higher
// priority is dispatched first, a sheddable one (negative) gets 429 with
// the reason header at once, an unknown objective is priority 0.
func TestObjectivePriority(t *testing.T) {
	engine := healthyInstance(t)
	ts := start(t, parseConfig(t, `
pools:
  - instances: [{address: `+engine+`}]
limits: {queue_budget_tokens: 10, max_queue_wait: 5s}
objectives: {critical: 10, batch: -1}
`), true)
	hold := ts.open(t)
	defer hold.close()
	ts.post(t, hold, "/v1/chat/completions", chat("m", "hold", true))

	shed := ts.open(t)
	defer shed.close()
	im := ts.post(t, shed, "/v1/chat/completions", chat("m", "shed", true), "x-llm-d-inference-objective", "batch").GetImmediateResponse()
	if im == nil || im.Status.Code != 429 || setHeader(im.Headers, droppedHeader) != "shed" {
		t.Fatalf("sheddable answer = %v, want 429 with %s: shed", im, droppedHeader)
	}
	order := make(chan string, 2)
	// wait sends a request that waits in the queue; its answer is read by
	// a goroutine, which the test waits for after ending the stream.
	wait := func(name string, kv ...string) {
		c := ts.open(t)
		c.headers(t, false, append(append([]string{}, duplexPost...), kv...)...)
		if err := c.stream.Send(reqBodyMsg(chat("m", name, true), true)); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := c.stream.Recv(); err == nil {
				order <- name
			}
		}()
		t.Cleanup(func() {
			c.cancel()
			<-done
		})
	}
	wait("unknown objective", "x-llm-d-inference-objective", "nobody")
	time.Sleep(50 * time.Millisecond) // it waits first: it would go first by age
	wait("critical", "x-gateway-inference-objective", "critical")
	time.Sleep(50 * time.Millisecond)
	hold.send(t, respHeadersMsg(false, ":status", "200"))
	hold.send(t, respBodyMsg("data: {}\n\n", true)) // releases the budget: one of them goes
	select {
	case got := <-order:
		if got != "critical" {
			t.Fatalf("dispatched first: %s, want critical", got)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("nothing dispatched after the budget was released")
	}
}

// x-llm-d-slo-ttft-ms is the request's TTFT objective when the router's own
// SLO header is absent; a value that is not a whole number of milliseconds
// in range is a 400 naming the header.
func TestTTFTHeader(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	capture := &captureFlow{flow: ts.srv.pools[0].flow}
	ts.srv.pools[0].flow = capture
	for _, tt := range []struct {
		value string
		extra []string
		want  time.Duration // 0: 400
	}{
		{"500", nil, 500 * time.Millisecond},
		{"3600000", nil, time.Hour},
		{"500", []string{"x-dualmap-slo", "interactive"}, time.Second}, // our header wins
		{"0", nil, 0}, {"-5", nil, 0}, {"1.5", nil, 0}, {"3600001", nil, 0}, {"fast", nil, 0},
	} {
		c := ts.open(t)
		r := ts.post(t, c, "/v1/chat/completions", chat("m", "ttft "+tt.value, false), append([]string{ttftHeader, tt.value}, tt.extra...)...)
		im := r.GetImmediateResponse()
		switch {
		case tt.want > 0 && im != nil:
			t.Errorf("%s: %s answered %d: %s", ttftHeader, tt.value, im.Status.Code, im.Body)
		case tt.want > 0 && capture.last().SLO != tt.want:
			t.Errorf("%s: %s %v: SLO = %v, want %v", ttftHeader, tt.value, tt.extra, capture.last().SLO, tt.want)
		case tt.want == 0 && (im == nil || im.Status.Code != 400 || !strings.Contains(string(im.Body), ttftHeader)):
			t.Errorf("%s: %s answered %v, want 400 naming the header", ttftHeader, tt.value, r)
		}
		c.close()
	}
}

// captureFlow remembers the last request routed.
type captureFlow struct {
	flow
	mu  sync.Mutex
	req *scheduler.Request
}

func (c *captureFlow) EnqueueAndWait(ctx context.Context, r *scheduler.Request) (scheduler.Decision, error) {
	c.mu.Lock()
	c.req = r
	c.mu.Unlock()
	return c.flow.EnqueueAndWait(ctx, r)
}

func (c *captureFlow) last() scheduler.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return scheduler.Request{SLO: c.req.SLO, Priority: c.req.Priority, Only: c.req.Only}
}

// uniqueChat is a chat whose prompt shares no prefix with another's.
func uniqueChat(s string) string {
	return fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":%q}]}`, strings.Repeat(s+" ", 200))
}

// The subset hint's entry-count bound: 4,096 entries are read, 4,097 are
// refused (503, the subset reason), as a list, as one comma-separated
// string, and split across list entries; empty entries do not count. Pins
// subsetHint's `len(out) == maxSubset` check (made `>`, or the bound one
// higher, 4,097 entries pass; one lower, 4,096 are refused).
func TestSubsetHintEntryLimit(t *testing.T) {
	entries := func(n int) []string {
		s := make([]string, n)
		s[0] = "10.0.0.2:8000" // the one pool member: the rest are strangers
		for i := 1; i < n; i++ {
			s[i] = fmt.Sprintf("10.9.%d.%d:80", i/256, i%256)
		}
		return s
	}
	forms := []struct {
		name string
		val  func(s []string) *structpb.Value
	}{
		{"list", func(s []string) *structpb.Value { return listValue(s...) }},
		{"comma string", func(s []string) *structpb.Value { return structpb.NewStringValue(strings.Join(s, ",") + ", ,") }},
		{"list of comma strings", func(s []string) *structpb.Value {
			h := len(s) / 2
			return listValue(strings.Join(s[:h], ","), " ", strings.Join(s[h:], ","))
		}},
	}
	for _, f := range forms {
		for _, tt := range []struct {
			n  int
			ok bool
		}{{maxSubset - 1, true}, {maxSubset, true}, {maxSubset + 1, false}} {
			md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
				subsetNamespace: {Fields: map[string]*structpb.Value{subsetKey: f.val(entries(tt.n))}}}}
			got, err := subsetHint(md)
			if tt.ok && (err != nil || len(got) != tt.n) {
				t.Errorf("%s of %d entries: subsetHint() = %d entries, %v; want all %d", f.name, tt.n, len(got), err, tt.n)
			}
			if !tt.ok && (err == nil || !strings.Contains(err.Error(), "more than 4096 entries")) {
				t.Errorf("%s of %d entries: subsetHint() = %d entries, %v; want an error naming the 4096-entry bound", f.name, tt.n, len(got), err)
			}
		}
	}
	if maxSubset != 4096 {
		t.Errorf("maxSubset = %d, want 4096 (the documented bound)", maxSubset)
	}

	// Through the stream: 4,096 entries route inside the hint, 4,097 get 503.
	cfg := parseConfig(t, fourInstances)
	cfg.Routing.Mode = config.ModeOriginalDst
	ts := start(t, cfg, false)
	for _, duplex := range []bool{false, true} {
		c := ts.open(t)
		if h, _ := pinAndMetadata(sendRequest(t, ts, c, duplex, listValue(entries(maxSubset)...), chat("m", "4096", false))); h != "10.0.0.2:8000" {
			t.Errorf("duplex=%v: a hint of 4096 entries pinned %q, want its one member 10.0.0.2:8000", duplex, h)
		}
		c.close()
		c = ts.open(t)
		im := sendRequest(t, ts, c, duplex, listValue(entries(maxSubset+1)...), chat("m", "4097", false)).GetImmediateResponse()
		if im == nil || im.GetStatus().GetCode() != 503 || setHeader(im.GetHeaders(), droppedHeader) != "subset" {
			t.Errorf("duplex=%v: a hint of 4097 entries answered %v, want 503 with %s: subset", duplex, im, droppedHeader)
		}
		c.close()
	}
}

// recordingStore is a pool's shared store that keeps the dispatch records
// it is given, for the tests (the memory store drops them).
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

// When another pool member served than the one pinned, the prompt's record
// reaches the shared store for the other replicas, not only this router's
// KV index; a stranger that served is recorded nowhere. Pins
// servedElsewhere's p.store.Dispatched (left out, the other replicas never
// learn that the member holds the prompt).
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
			ts := start(t, parseConfig(t, fourInstances), false)
			rs := &recordingStore{Store: ts.srv.pools[0].store}
			ts.srv.pools[0].store = rs
			c := ts.open(t)
			defer c.close()
			pinned, _ := pinAndMetadata(ts.post(t, c, "/v1/chat/completions", chat("m", tt.name, false)))
			pinned = strings.Split(pinned, ",")[0]
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
			m := respHeadersMsg(false, ":status", "200")
			withMetadata(m, servedNamespace, servedKey, structpb.NewStringValue(served))
			c.send(t, m)
			var got []coord.Record
			for _, r := range rs.records()[1:] {
				if r.Instance != served {
					t.Errorf("store record for %s after %s served, want none but for %s", r.Instance, served, served)
				}
				got = append(got, r)
			}
			if !tt.want {
				if len(got) != 0 {
					t.Errorf("a stranger's serving reached the store: %+v", got)
				}
				return
			}
			if len(got) != 1 || !slices.Equal(got[0].Blocks, recs[0].Blocks) {
				t.Errorf("store records for %s after it served = %+v, want one with the prompt's %d blocks", served, got, len(recs[0].Blocks))
			}
		})
	}
}
