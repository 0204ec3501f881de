package engine

import "testing"

// A prompt whose KV was received prefills only its last token; without
// it, all of it.
func TestReceiveMakesThePromptCached(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		p := testProfile()
		if !legacy {
			p.EngineModel = ModelRealistic
		}
		blocks := chain(7, 0, 8)
		tokens := len(blocks) * p.BlockSize
		for _, receive := range []bool{false, true} {
			e := newEngine(t, p)
			if receive {
				e.Receive(blocks)
			}
			r := &Request{ID: 1, Blocks: blocks, Tokens: tokens, Output: 2}
			e.Submit(0, r)
			for r.Done == 0 {
				e.Advance(e.NextTime(), nil)
			}
			want := 0
			if receive {
				want = tokens - 1 // the last token is computed all the same
				if legacy {
					want = tokens
				}
			}
			if r.CachedTokens < want-p.BlockSize || r.CachedTokens > want {
				t.Errorf("legacy %v, received %v: cached %d of %d tokens, want about %d", legacy, receive, r.CachedTokens, tokens, want)
			}
		}
	}
}
