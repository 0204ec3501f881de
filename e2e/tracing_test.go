//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// jaegerSpan is a span as Jaeger's query API (/api/traces/{id}) returns it.
type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	ProcessID string `json:"processID"`
}

func (s jaegerSpan) tag(k string) string {
	for _, t := range s.Tags {
		if t.Key == k {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

type jaegerTrace struct {
	Spans     []jaegerSpan `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

func (tr jaegerTrace) span(op string) (jaegerSpan, bool) {
	for _, s := range tr.Spans {
		if s.OperationName == op {
			return s, true
		}
	}
	return jaegerSpan{}, false
}

// startJaeger runs the Jaeger v2 binary DUALMAP_JAEGER (make e2e builds it
// with scripts/jaeger.sh) on free loopback ports and returns its OTLP HTTP
// endpoint and query API base URL.
func startJaeger(t *testing.T) (otlp, query string) {
	bin := os.Getenv("DUALMAP_JAEGER")
	if bin == "" {
		t.Skip("DUALMAP_JAEGER is not set; run `make e2e` (it builds Jaeger with scripts/jaeger.sh)")
	}
	ports := map[string]int{}
	for _, k := range []string{"JAEGER_OTLP_GRPC_PORT", "JAEGER_OTLP_HTTP_PORT", "JAEGER_QUERY_PORT", "JAEGER_QUERY_GRPC_PORT"} {
		ports[k] = freePort(t)
		t.Setenv(k, strconv.Itoa(ports[k]))
	}
	startProc(t, t.TempDir(), "jaeger", bin, "--config", repoRoot+"/tools/jaeger/config.yaml")
	query = fmt.Sprintf("http://127.0.0.1:%d", ports["JAEGER_QUERY_PORT"])
	waitHTTP(t, query+"/api/services", 60*time.Second)
	return fmt.Sprintf("http://127.0.0.1:%d", ports["JAEGER_OTLP_HTTP_PORT"]), query
}

// fetchTrace polls Jaeger until trace id holds every operation in ops.
func fetchTrace(t *testing.T, query, id string, ops ...string) jaegerTrace {
	t.Helper()
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(query + "/api/traces/" + id)
		if err == nil {
			var body struct {
				Data []jaegerTrace `json:"data"`
			}
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if err == nil && len(body.Data) == 1 {
				tr := body.Data[0]
				missing := false
				for _, op := range ops {
					if _, ok := tr.span(op); !ok {
						missing = true
					}
				}
				if !missing {
					return tr
				}
				last = fmt.Sprintf("%d spans", len(tr.Spans))
			}
		}
		if err != nil {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("trace %s did not reach Jaeger with %v within 30s (last: %s)", id, ops, last)
	return jaegerTrace{}
}

// TestTracingInJaeger sends requests through Envoy with a client
// traceparent to routers and engines exporting to a real Jaeger, then reads
// the traces back from Jaeger's query API: the decision span is the
// client span's child and carries the decision the response's debug
// headers report, and the engine's span joins the same trace under it.
func TestTracingInJaeger(t *testing.T) {
	otlp, query := startJaeger(t)
	// Inherited by the routers and engines startStack runs.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // export within 100 ms
	s := startStack(t, stackOptions{})

	const clientSpan = "00f067aa0ba902b7"
	traceIDs := []string{"4bf92f3577b34da6a3ce929d0e0e4736", "5cf92f3577b34da6a3ce929d0e0e4737"}
	// The same prompt twice: the first is routed cold, the second must go
	// where the first went, for its cached prefix.
	var replies []reply
	for _, id := range traceIDs {
		r := s.post("/v1/chat/completions", chatBody(systemPrompt, "Trace this request, please.", false, 8),
			"traceparent", "00-"+id+"-"+clientSpan+"-01")
		if r.status != 200 || r.instance == "" {
			t.Fatalf("request with trace %s: %v", id, r)
		}
		replies = append(replies, r)
	}
	if replies[1].instance != replies[0].instance {
		t.Fatalf("the repeated prompt went to %s, the first to %s: routing is not what the test controls", replies[1].instance, replies[0].instance)
	}

	for i, id := range traceIDs {
		tr := fetchTrace(t, query, id, "dualmap.route", "engine.inference")
		route, _ := tr.span("dualmap.route")
		engine, _ := tr.span("engine.inference")
		t.Logf("trace %s: %d spans; dualmap.route %s: instance=%s reason=%s predicted_cached=%s candidates=%s input_tokens=%s",
			id, len(tr.Spans), route.SpanID, route.tag("dualmap.instance"), route.tag("dualmap.reason"),
			route.tag("dualmap.predicted_cached_tokens"), route.tag("dualmap.candidates"), route.tag("gen_ai.usage.input_tokens"))
		if route.parent() != clientSpan {
			t.Errorf("trace %s: dualmap.route's parent is %q, want the client's span %s", id, route.parent(), clientSpan)
		}
		if engine.parent() != route.SpanID {
			t.Errorf("trace %s: engine.inference's parent is %q, want dualmap.route %s", id, engine.parent(), route.SpanID)
		}
		if svc := tr.Processes[route.ProcessID].ServiceName; svc != "dualmap" {
			t.Errorf("dualmap.route's service is %q, want dualmap", svc)
		}
		if svc := tr.Processes[engine.ProcessID].ServiceName; svc != "dualmap-engine" {
			t.Errorf("engine.inference's service is %q, want dualmap-engine", svc)
		}
		r := replies[i]
		want := map[string]string{
			"gen_ai.operation.name":           "chat",
			"gen_ai.request.model":            "dualmap-sim",
			"dualmap.pool":                    "default",
			"dualmap.policy":                  "dualmap",
			"dualmap.instance":                r.instance,
			"dualmap.served_instance":         r.engine,
			"dualmap.predicted_cached_tokens": r.header.Get("x-dualmap-cached-tokens"),
			"http.response.status_code":       "200",
		}
		if i == 1 {
			want["dualmap.reason"] = "cache"
		}
		for k, v := range want {
			if got := route.tag(k); got != v {
				t.Errorf("trace %s: %s = %q, want %q", id, k, got, v)
			}
		}
		if n, _ := strconv.Atoi(route.tag("gen_ai.usage.input_tokens")); n < 500 {
			t.Errorf("trace %s: gen_ai.usage.input_tokens = %q, want the prompt's (> 500)", id, route.tag("gen_ai.usage.input_tokens"))
		}
		if !strings.Contains(route.tag("dualmap.candidates"), r.instance) {
			t.Errorf("trace %s: candidates %s do not include the chosen %s", id, route.tag("dualmap.candidates"), r.instance)
		}
		if engine.tag("server.address") != r.engine {
			t.Errorf("trace %s: engine span's server.address %q, want %s", id, engine.tag("server.address"), r.engine)
		}
		for _, sp := range tr.Spans {
			for _, tg := range sp.Tags {
				if strings.Contains(fmt.Sprint(tg.Value), "meticulous assistant") {
					t.Errorf("span %s tag %s carries prompt text", sp.OperationName, tg.Key)
				}
			}
		}
	}
	if n, _ := strconv.Atoi(replies[1].header.Get("x-dualmap-cached-tokens")); n == 0 {
		t.Errorf("the repeated prompt: x-dualmap-cached-tokens = 0, want its prefix cached")
	}
}
