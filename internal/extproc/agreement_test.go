package extproc

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/replay"
	"github.com/dualmap/dualmap/internal/sim/trace"
)

// agreementRun replays the start of the conversation trace through
// replicas (each request to a random one, as Envoy would spread them) and
// returns the router's expected hit rate: cached tokens the chosen
// instance was believed to hold over prompt tokens.
func agreementRun(t *testing.T, tr *trace.Trace, reps []*testServer) float64 {
	pr := replay.NewPrompter(1, 512, 0.25)
	rng := rand.New(rand.NewPCG(7, 7))
	var cached, total int
	for i, q := range tr.Requests {
		body, _ := json.Marshal(map[string]any{"model": "m", "stream": true,
			"messages": []map[string]string{{"role": "user", "content": pr.Prompt(q.Blocks, int(float64(q.InputTokens)*0.25))}}})
		rep := reps[rng.IntN(len(reps))]
		c := rep.open(t)
		r := rep.post(t, c, "/v1/chat/completions", string(body))
		if r.GetRequestBody() == nil {
			t.Fatalf("request %d: %v", i, r)
		}
		rh := c.responseHeaders(t, "200")
		n, _ := strconv.Atoi(setHeader(rh.GetResponseHeaders().GetResponse().GetHeaderMutation(), "x-dualmap-cached-tokens"))
		cached += n
		total += len(body) / 4 // the byte approximation: 4 bytes a token
		c.close()
		time.Sleep(time.Millisecond) // trace order, faster than real time, slower than propagation batches
	}
	return float64(cached) / float64(total)
}

// conversationSlice is the start of the Mooncake conversation trace (see
// testdata/README.md).
const conversationSlice = "testdata/conversation_400.jsonl"

// Three replicas sharing Redis keep the cache affinity of a single router
// (within 3 percentage points of its expected hit rate); three that share
// nothing lose some.
func TestReplicaAgreementOnConversationTrace(t *testing.T) {
	tr, err := trace.ReadFile(conversationSlice, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := redisServer(t)
	var instances strings.Builder
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&instances, "      - address: %q\n", healthyInstance(t))
	}
	base := "pools:\n  - instances:\n" + instances.String() + "routing: {debug_headers: true}\nlimits: {max_body_bytes: 4194304, queue_budget_tokens: -1}\n"
	shared := base + fmt.Sprintf("state:\n  backend: redis\n  redis: {addrs: [%q], heartbeat: 50ms}\n", addr)

	single := agreementRun(t, tr, []*testServer{start(t, parseConfig(t, base), true)})
	var redisReps, aloneReps []*testServer
	for i := 0; i < 3; i++ {
		redisReps = append(redisReps, start(t, parseConfig(t, shared), true))
		aloneReps = append(aloneReps, start(t, parseConfig(t, base), true))
	}
	withRedis := agreementRun(t, tr, redisReps)
	alone := agreementRun(t, tr, aloneReps)
	t.Logf("expected hit rate on the first %d conversation requests: 1 replica %.1f%%, 3 replicas sharing Redis %.1f%%, 3 replicas alone %.1f%%",
		len(tr.Requests), 100*single, 100*withRedis, 100*alone)
	if withRedis < single-0.03 {
		t.Errorf("3 replicas with Redis: %.1f%%, want within 3 points of one replica's %.1f%%", 100*withRedis, 100*single)
	}
	if alone >= withRedis {
		t.Errorf("3 independent replicas (%.1f%%) do not lose anything against shared state (%.1f%%): the test shows nothing", 100*alone, 100*withRedis)
	}
}
