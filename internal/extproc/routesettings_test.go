package extproc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"
)

const twoPools = `
pools:
  - name: interactive
    models: ["*"]
    instances: [{address: 10.0.0.1:8000}, {address: 10.0.0.2:8000}]
  - name: batch
    models: [summarizer]
    instances: [{address: 10.0.1.1:8000}, {address: 10.0.1.2:8000}]
routing:
  debug_headers: true
slo:
  default: 5s
  classes: {interactive: 2s, batch: 60s}
`

func dualmapMeta(t testing.TB, kv map[string]any) *corev3.Metadata {
	t.Helper()
	s, err := structpb.NewStruct(kv)
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{settingsNamespace: s}}
}

func TestParseSettings(t *testing.T) {
	pools := func(n string) bool { return n == "batch" || n == "interactive" }
	slo := parseConfig(t, twoPools).SLOFor
	tests := []struct {
		name    string
		md      metadata.MD
		meta    map[string]any
		want    routeSettings
		unknown int
		err     string // "" no error
	}{
		{name: "nothing"},
		{name: "grpc metadata", md: metadata.Pairs("x-dualmap-pool", "batch", "x-dualmap-slo", "batch", "x-dualmap-priority", "-5",
			"x-dualmap-session-header", "x-conv", "x-dualmap-client-slo", "none", "x-dualmap-client-priority", "lower", "x-dualmap-route", "r1",
			"user-agent", "envoy", "x-envoy-internal", "true"),
			want: routeSettings{route: "r1", pool: "batch", slo: 60 * time.Second, priority: -5, prioritySet: true, sessionHeader: "x-conv", clientSLO: clientNone, clientPriority: clientTighter}},
		{name: "metadata overrides grpc metadata", md: metadata.Pairs("x-dualmap-slo", "batch", "x-dualmap-pool", "batch"),
			meta: map[string]any{"slo": "750ms", "priority": 3.0, "client_priority": true},
			want: routeSettings{pool: "batch", slo: 750 * time.Millisecond, priority: 3, prioritySet: true, clientPriority: clientAny}},
		{name: "metadata overrides a bad grpc metadata value", md: metadata.Pairs("x-dualmap-pool", "nope", "x-dualmap-slo", "soon"),
			meta: map[string]any{"pool": "interactive", "slo": "1s"},
			want: routeSettings{pool: "interactive", slo: time.Second}},
		{name: "a bad metadata value over a good grpc one", md: metadata.Pairs("x-dualmap-pool", "batch"),
			meta: map[string]any{"pool": "nope"}, err: `metadata pool = "nope": no such pool`},
		{name: "unknown keys", md: metadata.Pairs("x-dualmap-colour", "blue"), meta: map[string]any{"shape": "round", "slo": "interactive"},
			want: routeSettings{slo: 2 * time.Second}, unknown: 2},
		{name: "no such pool", md: metadata.Pairs("x-dualmap-pool", "gpu"), err: `grpc_metadata pool = "gpu": no such pool`},
		{name: "bad slo", meta: map[string]any{"slo": "soon"}, err: "metadata slo"},
		{name: "negative slo", meta: map[string]any{"slo": "-1s"}, err: "metadata slo"},
		{name: "bad priority", md: metadata.Pairs("x-dualmap-priority", "high"), err: "priority"},
		{name: "huge priority", meta: map[string]any{"priority": 1e12}, err: "priority"},
		{name: "fractional priority", meta: map[string]any{"priority": 1.5}, err: "priority"},
		{name: "bad session header", meta: map[string]any{"session_header": "X Conv"}, err: "session_header"},
		{name: "bad client policy", meta: map[string]any{"client_slo": "sometimes"}, err: "client_slo"},
		{name: "list value", meta: map[string]any{"pool": []any{"a"}}, err: `metadata dualmap."pool"`},
		{name: "two values", md: metadata.MD{"x-dualmap-pool": {"a", "b"}}, err: "has 2 values"},
		{name: "long value", md: metadata.Pairs("x-dualmap-route", strings.Repeat("r", maxSettingValue+1)), err: "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var meta *corev3.Metadata
			if tt.meta != nil {
				meta = dualmapMeta(t, tt.meta)
			}
			in, err := collectSettings(tt.md, meta, nil)
			var rs routeSettings
			var unknown []setting
			if err == nil {
				rs, unknown, err = parseSettings(in, pools, slo)
			}
			if tt.err != "" {
				if err == nil || !errors.Is(err, errRouteSetting) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("settings error = %v, want errRouteSetting mentioning %q", err, tt.err)
				}
				if e := classify(err, 0); e.status != 503 {
					t.Errorf("classify(%v) = %d, want 503", err, e.status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rs != tt.want || len(unknown) != tt.unknown {
				t.Errorf("settings = %+v (%d unknown), want %+v (%d unknown)", rs, len(unknown), tt.want, tt.unknown)
			}
		})
	}
}

func TestTooManySettings(t *testing.T) {
	md := metadata.MD{}
	for i := range maxSettings + 1 {
		md.Set("x-dualmap-k"+strings.Repeat("x", i), "v")
	}
	if _, err := collectSettings(md, nil, nil); err == nil || !errors.Is(err, errRouteSetting) {
		t.Errorf("collectSettings(%d keys) error = %v, want errRouteSetting", len(md), err)
	}
	kv := map[string]any{}
	for i := range maxSettings + 1 {
		kv[strings.Repeat("k", i+1)] = "v"
	}
	if _, err := collectSettings(nil, dualmapMeta(t, kv), nil); err == nil || !errors.Is(err, errRouteSetting) {
		t.Errorf("collectSettings(%d metadata keys) error = %v, want errRouteSetting", len(kv), err)
	}
}

func TestClientControls(t *testing.T) {
	cfg := parseConfig(t, twoPools)
	tests := []struct {
		name           string
		rs             routeSettings
		sloHdr, prHdr  string
		slo            time.Duration
		prio           int
		ignoredS, ignP bool
		err            bool
	}{
		{name: "no route, no headers", slo: 5 * time.Second},
		{name: "no route slo: client any", sloHdr: "batch", slo: 60 * time.Second},
		{name: "route slo: client tighter ok", rs: routeSettings{slo: 2 * time.Second}, sloHdr: "500ms", slo: 500 * time.Millisecond},
		{name: "route slo: looser clamped", rs: routeSettings{slo: 2 * time.Second}, sloHdr: "batch", slo: 2 * time.Second, ignoredS: true},
		{name: "route slo any", rs: routeSettings{slo: 2 * time.Second, clientSLO: clientAny}, sloHdr: "batch", slo: 60 * time.Second},
		{name: "client slo none", rs: routeSettings{clientSLO: clientNone}, sloHdr: "1s", slo: 5 * time.Second, ignoredS: true},
		{name: "client slo none ignores garbage", rs: routeSettings{clientSLO: clientNone}, sloHdr: "garbage", slo: 5 * time.Second, ignoredS: true},
		{name: "bad client slo", sloHdr: "garbage", err: true},
		{name: "forged priority ignored", rs: routeSettings{priority: 1}, prHdr: "100", slo: 5 * time.Second, prio: 1, ignP: true},
		{name: "priority lower ok", rs: routeSettings{priority: 5, clientPriority: clientTighter}, prHdr: "-3", slo: 5 * time.Second, prio: -3},
		{name: "priority lower clamps a raise", rs: routeSettings{priority: 5, clientPriority: clientTighter}, prHdr: "9", slo: 5 * time.Second, prio: 5, ignP: true},
		{name: "priority any", rs: routeSettings{clientPriority: clientAny}, prHdr: "9", slo: 5 * time.Second, prio: 9},
		{name: "bad priority", rs: routeSettings{clientPriority: clientAny}, prHdr: "x", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slo, ignS, err1 := tt.rs.sloFor(&cfg, tt.sloHdr)
			prio, ignP, err2 := tt.rs.priorityFor(&cfg, tt.prHdr)
			if tt.err {
				if err1 == nil && err2 == nil {
					t.Fatalf("sloFor/priorityFor = %v, %v; want an error", slo, prio)
				}
				for _, err := range []error{err1, err2} {
					if err != nil && classify(err, 0).status != 400 {
						t.Errorf("classify(%v) = %d, want 400", err, classify(err, 0).status)
					}
				}
				return
			}
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if slo != tt.slo || prio != tt.prio || ignS != tt.ignoredS || ignP != tt.ignP {
				t.Errorf("= slo %v (ignored %v), priority %d (ignored %v); want %v (%v), %d (%v)", slo, ignS, prio, ignP, tt.slo, tt.ignoredS, tt.prio, tt.ignP)
			}
		})
	}
}

// openWith opens a stream whose gRPC initial metadata is md, as Envoy's
// grpc_initial_metadata sends it.
func (ts *testServer) openWith(t testing.TB, md metadata.MD) *call {
	t.Helper()
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 10*time.Second)
	s, err := ts.client.Process(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return &call{stream: s, cancel: cancel}
}

func headersWithMeta(meta *corev3.Metadata, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{MetadataContext: meta, Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: hdrs(kv...)}}}
}

// Through the gRPC server: the route's pool and SLO apply whatever the
// model, a forged priority is ignored, a bad setting is a 503, unknown
// keys are counted and harmless.
func TestRouteSettingsOnStreams(t *testing.T) {
	ts := start(t, parseConfig(t, twoPools), false)
	route := func(md metadata.MD, meta *corev3.Metadata, extra ...string) (*extprocv3.ProcessingResponse, *extprocv3.ProcessingResponse) {
		c := ts.openWith(t, md)
		defer c.close()
		kv := append([]string{":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json"}, extra...)
		if r := c.send(t, headersWithMeta(meta, kv...)); r.GetRequestHeaders() == nil {
			return r, nil
		}
		body := c.body(t, chat("m", "hello", false))
		return body, c.responseHeaders(t, "200")
	}
	dest := func(r *extprocv3.ProcessingResponse) string {
		return strings.Split(setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"), ",")[0]
	}
	debug := func(r *extprocv3.ProcessingResponse, k string) string {
		return setHeader(r.GetResponseHeaders().GetResponse().GetHeaderMutation(), k)
	}

	// Model "m" goes to interactive by name; the route says batch.
	body, resp := route(metadata.Pairs("x-dualmap-pool", "batch", "x-dualmap-slo", "batch", "x-dualmap-route", "summaries"), nil,
		"x-dualmap-priority", "100", "x-dualmap-slo", "interactive")
	if d := dest(body); !strings.HasPrefix(d, "10.0.1.") {
		t.Errorf("route pool batch: pinned to %q, want a batch instance", d)
	}
	if got := debug(resp, "x-dualmap-pool") + " " + debug(resp, "x-dualmap-slo-ms") + " " + debug(resp, "x-dualmap-priority") + " " + debug(resp, "x-dualmap-route"); got != "batch 2000 0 summaries" {
		t.Errorf("debug headers = %q, want %q (client SLO tighter honoured, forged priority ignored)", got, "batch 2000 0 summaries")
	}

	// The forwarded metadata overrides the gRPC metadata.
	_, resp = route(metadata.Pairs("x-dualmap-slo", "batch"), dualmapMeta(t, map[string]any{"slo": "interactive", "priority": 7}),
		"x-dualmap-slo", "batch", "x-dualmap-priority", "100")
	if got := debug(resp, "x-dualmap-pool") + " " + debug(resp, "x-dualmap-slo-ms") + " " + debug(resp, "x-dualmap-priority"); got != "interactive 2000 7" {
		t.Errorf("debug headers = %q, want %q (looser client SLO clamped, forged priority ignored)", got, "interactive 2000 7")
	}
	if n := testutil.ToFloat64(ts.srv.rm.ignored.WithLabelValues("priority")); n != 2 {
		t.Errorf("ignored priority headers = %v, want 2", n)
	}

	// Unknown keys: counted, the request routed.
	body, _ = route(metadata.Pairs("x-dualmap-colour", "blue"), dualmapMeta(t, map[string]any{"shape": "round"}))
	if dest(body) == "" {
		t.Errorf("unknown keys: not routed: %v", body)
	}
	if n := testutil.ToFloat64(ts.srv.rm.unknown.WithLabelValues("grpc_metadata")) + testutil.ToFloat64(ts.srv.rm.unknown.WithLabelValues("metadata")); n != 2 {
		t.Errorf("unknown settings counted = %v, want 2", n)
	}

	// A bad value: 503 before the body.
	r, _ := route(metadata.Pairs("x-dualmap-pool", "gpu"), nil)
	if im := r.GetImmediateResponse(); im == nil || im.Status.Code != 503 {
		t.Fatalf("bad pool setting: %v, want 503", r)
	}
	if n := testutil.ToFloat64(ts.srv.m.errors.WithLabelValues("route_setting")); n != 1 {
		t.Errorf("route_setting errors = %v, want 1", n)
	}
}

// FuzzRouteSettings: any gRPC metadata and forwarded metadata either parse
// into settings within bounds or fail with errRouteSetting; never a panic.
func FuzzRouteSettings(f *testing.F) {
	f.Add("x-dualmap-pool", "batch", "slo", "2s", 1.0)
	f.Add("x-dualmap-priority", "-7", "client_slo", "tighter", 3.0)
	f.Add("x-dualmap-client-priority", "lower", "priority", "1e300", -1e308)
	f.Add("x-dualmap-", "", "", "\xff", 0.5)
	cfg := parseConfig(f, twoPools)
	pools := func(n string) bool { return n == "batch" || n == "interactive" }
	f.Fuzz(func(t *testing.T, mdKey, mdValue, metaKey, metaValue string, num float64) {
		md := metadata.MD{}
		md[strings.ToLower(mdKey)] = []string{mdValue}
		fields := map[string]*structpb.Value{
			metaKey:       structpb.NewStringValue(metaValue),
			metaKey + "n": structpb.NewNumberValue(num),
			"priority":    structpb.NewNumberValue(num),
		}
		meta := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{settingsNamespace: {Fields: fields}}}
		in, err := collectSettings(md, meta, nil)
		if err != nil {
			if !errors.Is(err, errRouteSetting) {
				t.Fatalf("collectSettings() error = %v, want errRouteSetting", err)
			}
			return
		}
		rs, _, err := parseSettings(in, pools, cfg.SLOFor)
		if err != nil {
			if !errors.Is(err, errRouteSetting) {
				t.Fatalf("parseSettings() error = %v, want errRouteSetting", err)
			}
			return
		}
		if rs.priority < -maxPriority || rs.priority > maxPriority || rs.slo < 0 || len(rs.route) > maxSettingValue || (rs.pool != "" && !pools(rs.pool)) {
			t.Fatalf("parseSettings() = %+v: out of bounds", rs)
		}
		for _, v := range []string{mdValue, metaValue} {
			if _, _, err := rs.sloFor(&cfg, v); err != nil && !errors.Is(err, errBadSLO) {
				t.Fatalf("sloFor(%q) error = %v", v, err)
			}
			if p, _, err := rs.priorityFor(&cfg, v); err != nil && !errors.Is(err, errBadPriority) || p < -maxPriority || p > maxPriority {
				t.Fatalf("priorityFor(%q) = %d, %v", v, p, err)
			}
		}
	})
}

// An inference objective's priority is the operator's value but the
// client's choice: it counts unless the route says otherwise.
func TestObjectivePriorityOnRoutes(t *testing.T) {
	for _, c := range []struct {
		name        string
		rs          routeSettings
		objective   int
		want        int
		wantIgnored bool
	}{
		{"no route settings", routeSettings{}, 10, 10, false},
		{"route without a priority", routeSettings{pool: "p"}, -1, -1, false},
		{"route sets a priority", routeSettings{priority: 5, prioritySet: true}, 10, 5, true},
		{"route sets priority zero", routeSettings{prioritySet: true}, 10, 0, true},
		{"route allows any", routeSettings{priority: 5, prioritySet: true, clientPriority: clientAny}, 10, 10, false},
		{"route allows lower: higher asked", routeSettings{priority: 5, prioritySet: true, clientPriority: clientTighter}, 10, 5, true},
		{"route allows lower: lower asked", routeSettings{priority: 5, prioritySet: true, clientPriority: clientTighter}, 1, 1, false},
		{"route forbids", routeSettings{clientPriority: clientNone}, 10, 0, true},
	} {
		got, ignored := c.rs.objectivePriority(c.objective)
		if got != c.want || ignored != c.wantIgnored {
			t.Errorf("%s: objectivePriority(%d) = %d, %v; want %d, %v", c.name, c.objective, got, ignored, c.want, c.wantIgnored)
		}
	}
}
