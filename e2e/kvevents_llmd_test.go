//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestKVEventsLLMDSim decodes llm-d's vLLM simulator's live KV-event
// stream (an independent publisher: Go, go-zeromq/zmq4, both encodings)
// through the router's bind mode: the simulator dials the router with
// its topic kv@<ip>:<port>@<model>, the router keys the blocks it stores
// and its view of the instance turns exact. Needs DUALMAP_LLMD_SIM (the
// simulator's binary, scripts/llmd-sim.sh); without it the test is
// skipped.
func TestKVEventsLLMDSim(t *testing.T) {
	bin := os.Getenv("DUALMAP_LLMD_SIM")
	if bin == "" {
		t.Skip("DUALMAP_LLMD_SIM is not set (scripts/llmd-sim.sh builds the simulator)")
	}
	t.Setenv("POD_IP", "127.0.0.1") // the simulator puts it in its topic
	for _, maps := range []bool{false, true} {
		t.Run(fmt.Sprintf("maps=%v", maps), func(t *testing.T) {
			bind := freePort(t)
			// The simulator dials once it starts, before the router (the
			// harness starts engines first) listens, and its publisher gives
			// up after a few retries: it dials a relay that waits for the
			// router instead.
			relay := startRelay(t, bind)
			s := startStack(t, stackOptions{engines: 1,
				engineArgs: func(i, port int) []string {
					args := []string{bin, "--port", fmt.Sprint(port), "--model", "dualmap-sim", "--enable-kvcache",
						"--kv-cache-size", "64", "--block-size", "16", "--max-model-len", "1024",
						"--zmq-endpoint", "tcp://" + relay,
						"--kv-events-replay-endpoint", fmt.Sprintf("tcp://127.0.0.1:%d", port+kvOffset+1)}
					if maps {
						args = append(args, "--use-vllm-map-event-format")
					}
					return args
				},
				poolConfig: fmt.Sprintf("    kv_events: {enabled: true, mode: bind, bind: 'tcp://127.0.0.1:%d', replay_offset: %d}\n", bind, kvOffset+1)})
			admin := s.routers[0].admin
			id := s.engines[0].addr
			sys := "A system prompt for the simulator. " + strings.Repeat("Some more words to fill blocks. ", 20)
			for i := range 3 {
				if r := s.post("/v1/chat/completions", chatBody(sys, fmt.Sprintf("question %d", i), false, 4)); r.status != 200 {
					t.Fatalf("request %d: %v", i, r)
				}
			}
			waitUntil(t, "the router's exact view of the simulator with its blocks", func() bool {
				v := debugInstance(t, admin, id)
				return v.ExactCache && v.CachedBlocks > 0
			})
			stored := routerMetric(t, admin, `dualmap_kv_event_blocks_total{outcome="stored",pool="default"}`)
			bad := routerMetric(t, admin, `dualmap_kv_event_decode_errors_total{pool="default"}`)
			unknown := routerMetric(t, admin, `dualmap_kv_events_total{pool="default",type="unknown"}`)
			v := debugInstance(t, admin, id)
			t.Logf("simulator %s: %g blocks stored, %d in the router's exact view, %g decode errors, %g unknown events", id, stored, v.CachedBlocks, bad, unknown)
			if bad != 0 || unknown != 0 {
				t.Errorf("decode errors %g, unknown events %g, want 0", bad, unknown)
			}
		})
	}
}

// startRelay listens on a free port and forwards each connection to
// 127.0.0.1:to, dialling it until it answers; it returns its address.
func startRelay(t *testing.T, to int) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				deadline := time.Now().Add(faultWait)
				var up net.Conn
				for up == nil && time.Now().Before(deadline) {
					if up, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", to)); err != nil {
						up = nil
						time.Sleep(50 * time.Millisecond) // the router not listening yet
					}
				}
				if up == nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
	return l.Addr().String()
}
