package replay

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/dualmap/dualmap/internal/sim/trace"
)

// TestWorkload: the trace Workload returns carries exactly the arrivals,
// prompt lengths and max_tokens Run would send, in 512-token blocks, and
// leaves its input alone.
func TestWorkload(t *testing.T) {
	tr, err := trace.ReadFile(conversationPath, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := cloneTrace(tr)
	opt := Options{Requests: 30, QPS: 7, ScaleTokens: 0.25, MaxOutput: 64}
	w, err := Workload(tr, opt, 0)
	if err != nil {
		t.Fatalf("Workload() error = %v", err)
	}
	if !reflect.DeepEqual(tr, before) {
		t.Error("Workload changed its input trace")
	}
	o, _, err := Options{URL: "http://x", Requests: 30, QPS: 7, ScaleTokens: 0.25, MaxOutput: 64}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	items, _, err := schedule(tr, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Requests) != len(items) || len(items) != 30 {
		t.Fatalf("Workload() has %d requests, schedule %d, want 30", len(w.Requests), len(items))
	}
	if w.BlockSize != trace.DefaultBlockSize {
		t.Errorf("BlockSize = %d, want %d", w.BlockSize, trace.DefaultBlockSize)
	}
	for i, r := range w.Requests {
		it := items[i]
		if r.Arrival != it.arrival || r.InputTokens != it.inputTokens || r.OutputTokens != it.maxTokens {
			t.Errorf("request %d = (%v, %d in, %d out), Run sends (%v, %d, %d)", i, r.Arrival, r.InputTokens, r.OutputTokens,
				it.arrival, it.inputTokens, it.maxTokens)
		}
		if want := (r.InputTokens + 511) / 512; len(r.Blocks) != want {
			t.Errorf("request %d: %d blocks for %d tokens, want %d", i, len(r.Blocks), r.InputTokens, want)
		}
		if r.OutputTokens < 1 || r.OutputTokens > 64 {
			t.Errorf("request %d: %d output tokens, want 1..64", i, r.OutputTokens)
		}
	}
	// The written trace reads back as a valid Mooncake trace.
	path := t.TempDir() + "/w.jsonl"
	if err := writeFile(path, w); err != nil {
		t.Fatal(err)
	}
	back, err := trace.ReadFile(path, trace.Options{})
	if err != nil {
		t.Fatalf("reading the written workload back: %v", err)
	}
	if len(back.Requests) != 30 {
		t.Errorf("read back %d requests, want 30", len(back.Requests))
	}
}

func TestWorkloadInvalid(t *testing.T) {
	tr, err := trace.ReadFile(conversationPath, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]func() error{
		"nil trace":      func() error { _, err := Workload(nil, Options{}, 0); return err },
		"block size":     func() error { _, err := Workload(tr, Options{}, -1); return err },
		"scale negative": func() error { _, err := Workload(tr, Options{ScaleTokens: -1}, 0); return err },
	} {
		if err := run(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: Workload() error = %v, want %v", name, err, ErrInvalidOptions)
		}
	}
}

func cloneTrace(t *trace.Trace) *trace.Trace {
	c := *t
	c.Requests = make([]trace.Request, len(t.Requests))
	for i, r := range t.Requests {
		r.Blocks = append([]uint64(nil), r.Blocks...)
		c.Requests[i] = r
	}
	return &c
}

func writeFile(path string, t *trace.Trace) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := trace.Write(f, t); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
