//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"

	"github.com/dualmap/dualmap/internal/kvevents"
	"github.com/dualmap/dualmap/internal/tokenize"
)

// kvIndex is a kvevents.Target holding one instance's blocks.
type kvIndex struct {
	mu     sync.Mutex
	blocks map[uint64]bool
	exact  bool
}

func (x *kvIndex) Stored(_ string, keys []uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range keys {
		x.blocks[k] = true
	}
}

func (x *kvIndex) Removed(_ string, keys []uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range keys {
		delete(x.blocks, k)
	}
}

func (x *kvIndex) Cleared(string)            { x.mu.Lock(); clear(x.blocks); x.mu.Unlock() }
func (x *kvIndex) SetExact(_ string, v bool) { x.mu.Lock(); x.exact = v; x.mu.Unlock() }

func (x *kvIndex) state() ([]uint64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []uint64
	for k := range x.blocks {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, x.exact
}

// TestKVEventsSGLangPublisher subscribes to SGLang's own publisher
// (its kv_events.py over pyzmq and libzmq: the real ZeroMQ, the real
// msgspec encoding) after it has published, so that the whole stream
// comes through its replay socket, then live: the router's keys are its
// hash of the token ids, the removal is applied, the salted block is not
// indexed. Needs DUALMAP_SGLANG_PY (a Python with msgspec, pyzmq and
// pydantic) and DUALMAP_SGLANG_KV_EVENTS (sglang/srt/disaggregation/
// kv_events.py from the SGLang wheel); skipped without them.
func TestKVEventsSGLangPublisher(t *testing.T) {
	py, src := os.Getenv("DUALMAP_SGLANG_PY"), os.Getenv("DUALMAP_SGLANG_KV_EVENTS")
	if py == "" || src == "" {
		t.Skip("DUALMAP_SGLANG_PY and DUALMAP_SGLANG_KV_EVENTS are not set")
	}
	port, rport := freePort(t), freePort(t)
	cmd := exec.Command(py, repoRoot+"/scripts/sglang_kv_publisher.py", src,
		fmt.Sprintf("tcp://127.0.0.1:%d", port), fmt.Sprintf("tcp://127.0.0.1:%d", rport))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line := make([]byte, 10)
	if _, err := out.Read(line); err != nil || string(line[:9]) != "published" {
		t.Fatalf("publisher: %q, %v", line, err)
	}

	x := &kvIndex{blocks: map[uint64]bool{}}
	sub, err := kvevents.New(kvevents.Config{Pool: "p", Port: port, ReplayPort: rport, BlockSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sub.Run(ctx, func() []string { return []string{"127.0.0.1:1"} }, x); close(done) }()
	defer func() { cancel(); <-done }()

	toks := make([]uint32, 32)
	for i := range toks {
		toks[i] = uint32(1000 + i)
	}
	want := tokenize.Blocks(toks, 16, nil) // the two blocks; the third was removed, the fourth is salted
	slices.Sort(want)
	waitUntil(t, "SGLang's blocks under the router's keys, exact", func() bool {
		got, exact := x.state()
		return exact && slices.Equal(got, want)
	})
}
