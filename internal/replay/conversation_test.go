package replay

import (
	"context"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/sim/trace"
)

// conversationPath is the start of the real Mooncake conversation trace
// (see testdata/README.md).
const conversationPath = "testdata/conversation_50.jsonl"

// TestConversationTrace replays the first 50 requests of the real trace,
// shrunk, and checks that prompts follow its prefix structure.
func TestConversationTrace(t *testing.T) {
	tr, err := trace.ReadFile(conversationPath, trace.Options{})
	if err != nil {
		t.Fatalf("trace.ReadFile() error = %v", err)
	}
	const scale = 0.05
	f := newFakeServer(t, fakeConfig{chunks: 2})
	results, sum, err := Run(context.Background(), tr, Options{URL: f.URL, QPS: 200, ScaleTokens: scale, Stream: true, Seed: 1})
	if err != nil || sum.OK != 50 {
		t.Fatalf("Run() = %d ok, %v, want 50 ok", sum.OK, err)
	}
	if sum.Duration > 5*time.Second {
		t.Errorf("Run() Duration = %v, want about 0.25s at 200 QPS", sum.Duration)
	}
	p := NewPrompter(1, tr.BlockSize, scale)
	bb := p.BlockBytes() // 102
	prompts := make(map[string]bool)
	reqs, _ := f.snapshot()
	for _, r := range reqs {
		prompts[r.text()] = true
	}
	want := make([]string, len(tr.Requests))
	for i, r := range tr.Requests {
		in := int(float64(r.InputTokens)*scale + 0.5)
		want[i] = p.Prompt(r.Blocks, in)
		if !prompts[want[i]] {
			t.Errorf("server did not get request %d's prompt", i)
		}
		if results[i].InputTokens != in {
			t.Errorf("Run() result %d InputTokens = %d, want %d", i, results[i].InputTokens, in)
		}
	}
	// Prompts share exactly their shared leading blocks' text (up to the
	// first word of the first differing block).
	for i := range tr.Requests {
		for j := i + 1; j < len(tr.Requests); j++ {
			a, b := tr.Requests[i].Blocks, tr.Requests[j].Blocks
			k := 0
			for k < len(a) && k < len(b) && a[k] == b[k] {
				k++
			}
			shared := min(k*bb, len(want[i]), len(want[j]))
			got := commonPrefix(want[i], want[j])
			if got < shared || k < min(len(a), len(b)) && got >= k*bb+tagLetters && got < min(len(want[i]), len(want[j])) {
				t.Errorf("requests %d and %d share %d blocks but %d prompt bytes (block %d bytes)", i, j, k, got, bb)
			}
		}
	}
}
