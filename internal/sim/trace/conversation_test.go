package trace

import (
	"bytes"
	"math"
	"os"
	"testing"
)

// conversationPath is the start of the real Mooncake conversation trace
// (see testdata/README.md).
const conversationPath = "testdata/conversation_240.jsonl"

func readConversation(tb testing.TB) []byte {
	tb.Helper()
	data, err := os.ReadFile(conversationPath)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// TestConversationTrace checks the reader and Stats against the numbers of
// testdata/README.md, computed from the JSON by another program.
func TestConversationTrace(t *testing.T) {
	tr, err := ReadFile(conversationPath, Options{})
	if err != nil {
		t.Fatalf("ReadFile() error = %v", err)
	}
	s := tr.Stats()
	t.Logf("conversation trace, first 240 requests: %v", s)
	checks := []struct {
		name           string
		got, want, tol float64 // |got - want| <= tol
	}{
		{"Requests", float64(s.Requests), 240, 0},
		{"Duration.Seconds()", s.Duration.Seconds(), 84, 0},
		{"MeanQPS", s.MeanQPS, 239.0 / 84, 1e-9},
		{"MeanInputTokens", s.MeanInputTokens, 14028.17, 0.005},
		{"MedianInputTokens", float64(s.MedianInputTokens), 8619, 0},
		{"P90InputTokens", float64(s.P90InputTokens), 27152, 0},
		{"MaxInputTokens", float64(s.MaxInputTokens), 120633, 0},
		{"MeanOutputTokens", s.MeanOutputTokens, 365.53, 0.005},
		{"TotalBlocks", float64(s.TotalBlocks), 6697, 0},
		{"DistinctBlocks", float64(s.DistinctBlocks), 6276, 0},
		{"UpperBoundHitRate", s.UpperBoundHitRate, 421.0 / 6697, 1e-12},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if math.Abs(c.got-c.want) > c.tol {
				t.Errorf("Stats().%s = %v, want %v ± %v", c.name, c.got, c.want, c.tol)
			}
		})
	}
	if tr.Requests[0].Arrival != 0 || tr.BlockSize != 512 || tr.Source != conversationPath {
		t.Errorf("ReadFile() = first arrival %v, BlockSize %d, Source %q", tr.Requests[0].Arrival, tr.BlockSize, tr.Source)
	}
}

// TestGeneratedStats logs the statistics of a default generated trace.
func TestGeneratedStats(t *testing.T) {
	tr, err := Generate(GenConfig{Seed: 1})
	if err != nil {
		t.Fatalf("Generate() error = %v", err)
	}
	t.Logf("default generated trace (%s): %v", tr.Source, tr.Stats())
}

func BenchmarkReadConversation(b *testing.B) {
	data := readConversation(b)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Read(bytes.NewReader(data), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	for b.Loop() {
		if _, err := Generate(GenConfig{Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
