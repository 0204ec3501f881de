package trace

import (
	"bytes"
	"math"
	"os"
	"testing"
)

// conversationPath is the real Mooncake conversation trace: shared/ sits
// beside the repository clone.
const conversationPath = "../../../../shared/traces/conversation_trace.jsonl"

func readConversation(tb testing.TB) []byte {
	tb.Helper()
	data, err := os.ReadFile(conversationPath)
	if os.IsNotExist(err) {
		tb.Skipf("%s absent", conversationPath)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// TestConversationTrace checks the reader and Stats against the numbers of
// shared/traces/README.md.
func TestConversationTrace(t *testing.T) {
	readConversation(t)
	tr, err := ReadFile(conversationPath, Options{})
	if err != nil {
		t.Fatalf("ReadFile() error = %v", err)
	}
	s := tr.Stats()
	t.Logf("conversation trace: %v", s)
	checks := []struct {
		name           string
		got, want, tol float64 // |got - want| <= tol
	}{
		{"Requests", float64(s.Requests), 12031, 0},
		{"Duration.Minutes()", s.Duration.Minutes(), 58.9, 0.1},
		{"MeanQPS", s.MeanQPS, 3.4, 0.01},
		{"MeanInputTokens", s.MeanInputTokens, 12035, 0.5},
		{"MedianInputTokens", float64(s.MedianInputTokens), 6909, 0},
		{"P90InputTokens", float64(s.P90InputTokens), 27367, 0},
		{"MaxInputTokens", float64(s.MaxInputTokens), 126195, 0},
		{"MeanOutputTokens", s.MeanOutputTokens, 343, 0.5},
		{"UpperBoundHitRate", s.UpperBoundHitRate, 0.366, 0.0005},
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
