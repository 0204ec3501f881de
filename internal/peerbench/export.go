package peerbench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/dualmap/dualmap/internal/replay"
	"github.com/dualmap/dualmap/internal/sim/trace"
)

// Scheduled is the workload as a run at qps sends it: arrivals rescaled to
// qps (trace.ScaleToQPS), token counts scaled and output capped as replay
// does, and its block size scaled likewise. It does not change w.
func (w Workload) Scheduled(qps float64) (*trace.Trace, error) {
	if w.Trace == nil || len(w.Trace.Requests) == 0 {
		return nil, fmt.Errorf("peerbench: %s: %w: empty trace", w.Name, ErrInvalidWorkload)
	}
	scale := w.Scale
	if scale == 0 {
		scale = 1
	}
	bs := w.Trace.BlockSize
	if bs <= 0 {
		bs = trace.DefaultBlockSize
	}
	reqs := make([]trace.Request, len(w.Trace.Requests))
	for i, r := range w.Trace.Requests {
		out := int(math.Round(float64(r.OutputTokens) * scale))
		if w.MaxOutput > 0 {
			out = min(out, w.MaxOutput)
		}
		r.InputTokens = max(1, int(math.Round(float64(r.InputTokens)*scale)))
		r.OutputTokens = max(1, out)
		r.Blocks = slices.Clone(r.Blocks)
		reqs[i] = r
	}
	t := &trace.Trace{Requests: reqs, BlockSize: max(1, int(math.Round(float64(bs)*scale))), Source: w.Trace.Source}
	if qps > 0 && len(reqs) >= 2 {
		if err := t.ScaleToQPS(qps); err != nil {
			return nil, fmt.Errorf("peerbench: %s: %w", w.Name, err)
		}
	}
	return t, nil
}

// WriteMooncake writes the workload as sent at qps in the Mooncake JSON
// Lines format (trace.Write): {"timestamp": ms, "input_length": n,
// "output_length": n, "hash_ids": [...]}, lengths already scaled and
// capped, one hash id per block of the scaled block size (BlockSize of
// Scheduled's trace, which a client such as AIPerf must be told).
// Timestamps are the run's arrivals in milliseconds from 0.
func (w Workload) WriteMooncake(out io.Writer, qps float64) (blockSize int, err error) {
	t, err := w.Scheduled(qps)
	if err != nil {
		return 0, err
	}
	// A scaled length rounds down past a block boundary now and then
	// (10,753 tokens in 22 blocks of 512 are 2,688 in 21 of 128): the
	// blocks past the prompt's end carry no token of it, and a client
	// that cuts prompts into one block per id wants exactly as many ids.
	for i := range t.Requests {
		r := &t.Requests[i]
		r.Blocks = r.Blocks[:min(len(r.Blocks), (r.InputTokens+t.BlockSize-1)/t.BlockSize)]
	}
	return t.BlockSize, trace.Write(out, t)
}

// PromptRecord is one line of the plain prompts form (WritePrompts).
type PromptRecord struct {
	TimestampMS float64 `json:"timestamp"`
	Prompt      string  `json:"prompt"`
	MaxTokens   int     `json:"max_tokens"`
}

// WritePrompts writes the workload as sent at qps in a plain prompts form,
// JSON Lines of PromptRecord: {"timestamp": ms, "prompt": "...",
// "max_tokens": n}, the very text `dualmap replay` sends with seed (its
// Prompter over the blocks, at the workload's scale), so that another
// client sends the same prompts in a single user message.
func (w Workload) WritePrompts(out io.Writer, qps float64, seed uint64) error {
	t, err := w.Scheduled(qps)
	if err != nil {
		return err
	}
	scale := w.Scale
	if scale == 0 {
		scale = 1
	}
	bs := w.Trace.BlockSize
	if bs <= 0 {
		bs = trace.DefaultBlockSize
	}
	p := replay.NewPrompter(seed, bs, scale)
	bw := bufio.NewWriterSize(out, 64<<10)
	enc := json.NewEncoder(bw)
	for _, r := range t.Requests {
		rec := PromptRecord{TimestampMS: float64(r.Arrival.Microseconds()) / 1000, Prompt: p.Prompt(r.Blocks, r.InputTokens), MaxTokens: r.OutputTokens}
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("peerbench: prompts: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("peerbench: prompts: %w", err)
	}
	return nil
}
