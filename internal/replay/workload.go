package replay

import (
	"fmt"

	"github.com/dualmap/dualmap/internal/sim/trace"
)

// Workload returns, as a trace in blocks of blockSize tokens (0:
// trace.DefaultBlockSize, the Mooncake traces' 512), the requests Run
// would send for tr and opt: the first
// opt.Requests, arrivals rescaled to opt.QPS, input lengths scaled by
// opt.ScaleTokens and output lengths scaled and capped as max_tokens is
// (at least 1), all exactly as Run computes them. The block ids are re-cut
// from the scaled blocks of the prompts Run synthesises (tr.BlockSize ×
// opt.ScaleTokens tokens each) into blocks of blockSize by trace.Reblock,
// so another client replaying the result (a Mooncake-format trace, with
// trace.Write) sends prompts with the same prefix structure, except that
// reuse of less than one whole new block is lost (none when blockSize is
// the scaled block length or divides it). tr is not modified. opt.URL is not needed; invalid options give an error wrapping
// ErrInvalidOptions.
func Workload(tr *trace.Trace, opt Options, blockSize int) (*trace.Trace, error) {
	if tr == nil {
		return nil, fmt.Errorf("replay: %w: nil trace", ErrInvalidOptions)
	}
	if opt.URL == "" {
		opt.URL = "http://workload.invalid" // resolve checks the URL; it is not used
	}
	if blockSize == 0 {
		blockSize = trace.DefaultBlockSize
	}
	if blockSize < 0 {
		return nil, fmt.Errorf("replay: %w: block size must be >= 1, got %d", ErrInvalidOptions, blockSize)
	}
	o, _, err := opt.resolve()
	if err != nil {
		return nil, err
	}
	items, _, err := schedule(tr, o)
	if err != nil {
		return nil, err
	}
	tokens := tr.BlockSize
	if tokens <= 0 {
		tokens = trace.DefaultBlockSize
	}
	out := &trace.Trace{Requests: make([]trace.Request, len(items)), BlockSize: tokens, Source: tr.Source}
	for i, it := range items {
		out.Requests[i] = trace.Request{
			Arrival: it.arrival, InputTokens: it.inputTokens, OutputTokens: it.maxTokens,
			Blocks: it.blocks, // Reblock replaces them, leaving tr's alone
		}
	}
	// The block length of the prompts Run sends, in tokens.
	from := float64(NewPrompter(o.Seed, tokens, o.ScaleTokens).BlockBytes()) / BytesPerToken
	if err := out.Reblock(from, blockSize); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	return out, nil
}
