//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/replay"
	"github.com/dualmap/dualmap/internal/sim"
	"github.com/dualmap/dualmap/internal/sim/trace"
)

// A slice of the conversation trace replayed through the whole stack with
// dualmap and with round robin: the ordering of their cache hit rates is the
// one the simulator predicts for the same slice. TTFTs are reported, not
// asserted (timing belongs in reports).
func TestTraceReplayMatchesSimulator(t *testing.T) {
	path := filepath.Join(repoRoot, "e2e", "testdata", "conversation_240.jsonl")
	tr, err := trace.ReadFile(path, trace.Options{Limit: 240})
	if err != nil {
		t.Fatal(err)
	}
	// The stack replays prompts at a quarter of their size on engines ten
	// times faster than real: the simulator gets the same offered load in
	// full-size requests (qps x 0.25 / 10).
	const qps, scale, speed = 10, 0.25, 10
	predicted := map[string]*sim.Result{}
	for _, policy := range []string{"dualmap", "round-robin"} {
		r, err := sim.Simulate(tr, qps*scale/speed, sim.Options{Policy: policy, Instances: 4, Warmup: -1})
		if err != nil {
			t.Fatal(err)
		}
		predicted[policy] = r
	}
	measured := map[string]replay.Summary{}
	for _, policy := range []string{"dualmap", "round-robin"} {
		s := startStack(t, stackOptions{policy: policy, timeScale: speed})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		_, sum, err := replay.Run(ctx, tr, replay.Options{URL: s.url, QPS: qps, Stream: true, MaxOutput: 32, ScaleTokens: scale, Model: "dualmap-sim"})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if sum.Failed > 0 {
			t.Errorf("%s: %d of %d requests failed", policy, sum.Failed, sum.Requests)
		}
		measured[policy] = sum
		s.stop()
	}
	for _, p := range []string{"dualmap", "round-robin"} {
		t.Logf("%-12s simulated: hit %.1f%% TTFT p50 %.2fs p90 %.2fs | through Envoy: hit %.1f%% TTFT p50 %v p90 %v",
			p, 100*predicted[p].CacheHitRate, predicted[p].TTFTP50, predicted[p].TTFTP90,
			100*measured[p].HitRate, measured[p].TTFT.P50, measured[p].TTFT.P90)
	}
	simSays := predicted["dualmap"].CacheHitRate > predicted["round-robin"].CacheHitRate
	stackSays := measured["dualmap"].HitRate > measured["round-robin"].HitRate
	if !simSays || simSays != stackSays {
		t.Errorf("hit-rate ordering: simulator says dualmap > round robin = %v, the stack says %v", simSays, stackSays)
	}
}
