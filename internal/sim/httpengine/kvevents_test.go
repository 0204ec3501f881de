package httpengine

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/dualmap/dualmap/internal/kvevents"
	"github.com/dualmap/dualmap/internal/sim/engine"
	"github.com/dualmap/dualmap/internal/tokenize"
)

// index is a kvevents.Target holding one instance's blocks.
type index struct {
	mu     sync.Mutex
	blocks map[uint64]bool
	exact  bool
}

func (x *index) Stored(_ string, keys []uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range keys {
		x.blocks[k] = true
	}
}

func (x *index) Removed(_ string, keys []uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range keys {
		delete(x.blocks, k)
	}
}

func (x *index) Cleared(string) { x.mu.Lock(); clear(x.blocks); x.mu.Unlock() }

func (x *index) SetExact(_ string, v bool) { x.mu.Lock(); x.exact = v; x.mu.Unlock() }

// holds reports whether every key is held, and the view is exact.
func (x *index) holds(keys []uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range keys {
		if !x.blocks[k] {
			return false
		}
	}
	return x.exact
}

func (x *index) holdsNone(keys []uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range keys {
		if x.blocks[k] {
			return false
		}
	}
	return true
}

// The engine publishes its cache as vLLM does, in its own hashes; a
// subscriber keys what it stores by the router's hash of the token ids
// (the router's own tokenization of the same chat), and sees the blocks
// leave when the small cache evicts them.
func TestKVEventsPublishTheCache(t *testing.T) {
	for _, enc := range []kvevents.Encoding{kvevents.Arrays, kvevents.Maps} {
		pub, err := kvevents.NewPublisher(kvevents.PublisherConfig{Endpoint: "tcp://127.0.0.1:0", Mode: kvevents.Bind, Replay: "tcp://127.0.0.1:0", Encoding: enc})
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		prof, err := engine.LoadProfile("llamacpp-tiny-cpu")
		if err != nil {
			t.Fatal(err)
		}
		prof.HBMCacheBytes = prof.KVBytesPerToken * 16 * 24 // 24 blocks
		prof.MaxModelLen = 256
		opt := fast()
		opt.Profile, opt.KVEvents = prof, pub
		_, url := start(t, opt)

		x := &index{blocks: map[uint64]bool{}}
		sub, err := kvevents.New(kvevents.Config{Pool: "p", Port: pub.Addr().(*net.TCPAddr).Port, ReplayPort: pub.ReplayAddr().(*net.TCPAddr).Port, BlockSize: 16})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { sub.Run(ctx, func() []string { return []string{"127.0.0.1:1"} }, x); close(done) }()
		defer func() { cancel(); <-done }()

		router, err := tokenize.NewPrompter(tokenize.Bytes(), tokenize.Config{BlockSize: 16})
		if err != nil {
			t.Fatal(err)
		}
		keysOf := func(content string) []uint64 {
			var p tokenize.Prompt
			if err := router.Messages([]tokenize.Message{{Role: "user", Content: content}}, &p); err != nil {
				t.Fatal(err)
			}
			return p.Blocks[:p.Tokens/16]
		}
		// Empty batches until the subscriber has joined (replay brings it
		// the ones it missed): its view is then exact.
		waitFor(t, "the subscriber's exact view", func() bool {
			_ = pub.Publish(1, nil, -1)
			return x.holds(nil)
		})
		first := strings.Repeat("the first prompt, ", 40)
		if a := do(t, "POST", url+"/v1/chat/completions", chatBody(first, "")); a.status != 200 {
			t.Fatalf("chat: %d %s", a.status, a.body)
		}
		waitFor(t, "the first prompt's blocks under the router's keys", func() bool { return x.holds(keysOf(first)) })
		for i := range 4 { // 4 x ~11 blocks through a cache of 24
			other := strings.Repeat(string(rune('a'+i))+" another prompt, ", 36)
			if a := do(t, "POST", url+"/v1/chat/completions", chatBody(other, "")); a.status != 200 {
				t.Fatalf("chat: %d %s", a.status, a.body)
			}
		}
		waitFor(t, "the first prompt's blocks evicted", func() bool { return x.holdsNone(keysOf(first)) })
	}
}

// With KV events on (the engine keys its cache by its own token ids, and
// the P/D legs name the blocks by those keys), a decode leg still finds
// the KV it received.
func TestPDLegsWithKVEvents(t *testing.T) {
	url := func(name string) string {
		pub, err := kvevents.NewPublisher(kvevents.PublisherConfig{Endpoint: "tcp://127.0.0.1:0", Mode: kvevents.Bind})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pub.Close() })
		opt := fast()
		opt.Name, opt.KVEvents = name, pub
		_, u := start(t, opt)
		return u
	}
	pre, dec := url("prefill"), url("decode")
	content := strings.Repeat("A prompt keyed by the engine's own tokens. ", 40)
	status, got, raw := postPD(t, pre, chatBody(content, `,"max_tokens":1,"kv_transfer_params":{"do_remote_decode":true}`))
	if status != 200 || len(got.KV) == 0 {
		t.Fatalf("prefill leg: %d %s", status, raw)
	}
	status, got, raw = postPD(t, dec, chatBody(content, `,"max_tokens":2,"kv_transfer_params":`+string(got.KV)))
	if status != 200 {
		t.Fatalf("decode leg: %d %s", status, raw)
	}
	if c := got.Usage.PromptTokensDetails.CachedTokens; c != got.Usage.PromptTokens-1 {
		t.Errorf("decode leg cached_tokens = %d of %d, want all but the last token (received)", c, got.Usage.PromptTokens)
	}
}
