//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A prefill/decode pool served by llm-d's own parts: Envoy -> dualmap ->
// decode instances, each llm-d's P/D sidecar (cmd/pd-sidecar of
// llm-d-router) in front of llm-d's vLLM simulator, and prefill instances,
// the simulator alone. The router pins each request to a decode instance
// and, when its decider says so, names a prefill instance in
// x-prefiller-host-port; the sidecar then sends the prompt there first
// (kv_transfer_params do_remote_decode, max_tokens 1) and decodes with the
// prefill's answer (do_remote_prefill). DUALMAP_LLMD_SIDECAR and
// DUALMAP_LLMD_SIM name the binaries (make e2e-pd builds them with
// scripts/llmd-sidecar.sh and scripts/llmd-sim.sh from llm-d's snapshots).

// pdStack is a stack whose engines are the decode sidecars, with the
// prefill simulators beside it.
type pdStack struct {
	*stack
	prefill []string // the prefill instances' addresses
	decode  []string // the decode instances' (sidecars') addresses
	sims    map[string]*engineProc
}

const pdConfig = `    pd: {min_uncached_tokens: 64, decode_hit_ratio: 0.9}
`

func startPDStack(t *testing.T, nPrefill, nDecode int) *pdStack {
	t.Helper()
	sim, side := os.Getenv("DUALMAP_LLMD_SIM"), os.Getenv("DUALMAP_LLMD_SIDECAR")
	if sim == "" || side == "" {
		t.Skip("DUALMAP_LLMD_SIM / DUALMAP_LLMD_SIDECAR not set: run `make e2e-pd LLMD_SRC=<llm-d-router checkout> LLMD_SIM_SRC=<llm-d-inference-sim checkout>`")
	}
	profile := filepath.Join(repoRoot, "e2e", "testdata", "llmd-sim-pd.yaml")
	dir := t.TempDir()
	ps := &pdStack{sims: map[string]*engineProc{}}
	startSim := func(name string) string {
		port := freePort(t)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		// POD_IP is required with the KV cache on; env(1) execs.
		p := startProc(t, dir, name, "env", "POD_IP=127.0.0.1", sim, "--config", profile, "--port", strconv.Itoa(port))
		ps.sims[addr] = &engineProc{proc: p, addr: addr}
		return addr
	}
	for i := range nPrefill {
		ps.prefill = append(ps.prefill, startSim(fmt.Sprintf("prefill-%d", i)))
	}
	var behind []string
	for i := range nDecode {
		behind = append(behind, startSim(fmt.Sprintf("decode-sim-%d", i)))
	}
	for addr := range ps.sims {
		waitHTTP(t, "http://"+addr+"/health", 60*time.Second)
	}
	ps.stack = startStack(t, stackOptions{
		engines: nDecode,
		engineArgs: func(i, port int) []string {
			_, simPort, _ := strings.Cut(behind[i], ":")
			return []string{side, "--port", strconv.Itoa(port), "--model-server-port", simPort, "--secure-proxy=false"}
		},
		pools: func(engines []string) string {
			ps.decode = engines
			var b strings.Builder
			b.WriteString("pools:\n  - name: pd\n    block_size: 16\n    candidates: 2\n    instances:\n")
			for _, e := range engines {
				fmt.Fprintf(&b, "      - {address: %s, role: decode}\n", e)
			}
			for _, p := range ps.prefill {
				fmt.Fprintf(&b, "      - {address: %s, role: prefill}\n", p)
			}
			b.WriteString(pdConfig)
			return b.String()
		},
	})
	return ps
}

// prefilled returns how many requests each prefill simulator has completed
// (the count of its vllm:time_to_first_token_seconds: one per request, the prefill leg's included).
func (ps *pdStack) prefilled() map[string]float64 {
	out := map[string]float64{}
	for _, addr := range ps.prefill {
		out[addr] = metricSum("http://"+addr+"/metrics", "vllm:time_to_first_token_seconds_count")
	}
	return out
}

// metricSum adds up every sample of the series name on a Prometheus page
// (-1 when the page cannot be read).
func metricSum(url, name string) float64 {
	resp, err := client.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return -1
	}
	sum := 0.0
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		if v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// waitPrefilled waits, at most faultWait, until the prefill simulators'
// counts are want, and fails the test saying what they were otherwise.
func (ps *pdStack) waitPrefilled(t *testing.T, want map[string]float64) {
	t.Helper()
	var got map[string]float64
	if !waitLoad(func() bool { got = ps.prefilled(); return fmt.Sprint(got) == fmt.Sprint(want) }) {
		t.Fatalf("prefill simulators completed %v, want %v (the router's remote prefills)", got, want)
	}
}

// pdReply is what a P/D response says of its decision.
func pdOf(r reply) (prefill, reason string) {
	return r.header.Get("x-dualmap-prefill-instance"), r.header.Get("x-dualmap-pd-reason")
}

// debugEntry is one entry of a P/D pool's /debug/instances.
type debugEntry struct {
	ID, Role, Half                 string
	Healthy                        bool
	Running, PendingTokens, Queued int
}

func (ps *pdStack) debugInstances(t *testing.T) []debugEntry {
	t.Helper()
	resp, err := client.Get("http://" + ps.routers[0].admin + "/debug/instances")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string][]debugEntry
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out["pd"]
}

// tail is a unique end of a prompt: about 160 tokens under the router's
// byte approximation, past pd.min_uncached_tokens and over a tenth of the
// prompts below, so that they are prefilled remotely.
func uniqueTail(tag string) string {
	return strings.Repeat(tag+" asks about parcel routing. ", 640/(len(tag)+27)+1)
}

func TestPDThroughLLMDSidecar(t *testing.T) {
	ps := startPDStack(t, 3, 2)
	s := ps.stack
	post := func(system, user string) reply {
		return s.post("/v1/chat/completions", chatBody(system, user, false, 4))
	}
	served := func(t *testing.T, r reply) {
		t.Helper()
		if r.failed() || !strings.Contains(string(r.body), `"choices"`) {
			t.Fatalf("request failed: %v", r)
		}
		if !slices.Contains(ps.decode, r.instance) {
			t.Fatalf("pinned to %q, want a decode instance of %v", r.instance, ps.decode)
		}
	}
	counts := ps.prefilled()

	// The decider: a short prompt decodes where it prefills; a long one is
	// prefilled by a prefill instance, which then has exactly one more
	// request; the same again is held by its decode instance.
	t.Run("decider", func(t *testing.T) {
		r := post("Be brief.", "hi")
		served(t, r)
		if pre, why := pdOf(r); pre != "" || why != "short" {
			t.Errorf("short prompt: prefill %q (%s), want none (short)", pre, why)
		}
		ps.waitPrefilled(t, counts)
		long := "solo " + systemPrompt
		r = post(long, "hi")
		served(t, r)
		pre, why := pdOf(r)
		if why != "remote" || !slices.Contains(ps.prefill, pre) {
			t.Fatalf("long prompt: prefill %q (%s), want one of %v (remote)", pre, why, ps.prefill)
		}
		counts[pre]++
		ps.waitPrefilled(t, counts)
		r = post(long, "hi")
		served(t, r)
		if pre, why := pdOf(r); pre != "" || why != "decode_cached" {
			t.Errorf("repeated prompt: prefill %q (%s), want none (decode_cached)", pre, why)
		}
		ps.waitPrefilled(t, counts)
		// Streamed: the sidecar prefills without streaming, then streams the
		// decode leg through.
		r = s.post("/v1/chat/completions", chatBody("streamed "+systemPrompt, "hi", true, 4))
		pre, why = pdOf(r)
		if r.failed() || r.chunks == 0 || !r.done || why != "remote" || !slices.Contains(ps.prefill, pre) {
			t.Fatalf("streamed long prompt: %v, %d chunks, done %v, prefill %q (%s); want a stream prefilled remotely", r, r.chunks, r.done, pre, why)
		}
		counts[pre]++
		ps.waitPrefilled(t, counts)
	})

	// A shared prefix's prefills stay on its candidate pair (candidates:
	// 2 over three prefill instances), and every one the router named was
	// done there.
	t.Run("prefix pair", func(t *testing.T) {
		for g := range 3 {
			used := map[string]int{}
			for i := range 6 {
				r := post(fmt.Sprintf("group %d %s %s", g, systemPrompt, uniqueTail(fmt.Sprintf("g%dr%d", g, i))), "hi")
				served(t, r)
				pre, why := pdOf(r)
				if why != "remote" {
					t.Fatalf("group %d request %d: %s, want remote", g, i, why)
				}
				used[pre]++
				counts[pre]++
			}
			if len(used) > 2 {
				t.Errorf("group %d prefilled on %v: more than its candidate pair", g, used)
			}
		}
		ps.waitPrefilled(t, counts)
	})

	// Killing the busiest prefill instance mid-run: at most the request
	// each client had in flight there fails; once the router has it out,
	// every request is served, prefilled elsewhere.
	t.Run("prefill instance killed", func(t *testing.T) {
		var mu sync.Mutex
		var victim string
		var downAt time.Time
		prompt := func(w, i int) string {
			return fmt.Sprintf("client %d %s %s", w, systemPrompt, uniqueTail(fmt.Sprintf("c%dq%d", w, i)))
		}
		busiestPrefill := func(done []sample) (string, int) {
			n := map[string]int{}
			for _, x := range done {
				if pre, _ := pdOf(x.reply); pre != "" && !x.failed() {
					n[pre]++
				}
			}
			best := ""
			for p, c := range n {
				if best == "" || c > n[best] || c == n[best] && p < best {
					best = p
				}
			}
			return best, n[best]
		}
		samples, faultAt := underLoad(t, s, loadRun{
			prompt: prompt,
			ready: func(done []sample) bool {
				_, n := busiestPrefill(done)
				return everyClientServed(done) && n >= 2
			},
			fault: func(done []sample) {
				v, _ := busiestPrefill(done)
				ps.sims[v].killNow()
				out := func() bool {
					for _, e := range ps.debugInstances(t) {
						if e.ID == v && e.Half == "prefill" {
							return !e.Healthy
						}
					}
					return false
				}
				if !waitLoad(out) {
					t.Errorf("the router still has prefill instance %s in rotation %v after it died", v, faultWait)
				}
				mu.Lock()
				victim, downAt = v, time.Now()
				mu.Unlock()
			},
			enough: func(later []sample) bool {
				mu.Lock()
				at := downAt
				mu.Unlock()
				ok := 0
				for _, x := range startedAfter(later, at) {
					if !x.failed() {
						ok++
					}
				}
				return ok >= 2*loadClients
			},
		})
		failed, perClient := 0, map[int]int{}
		for _, x := range samples {
			pre, _ := pdOf(x.reply)
			switch {
			case x.failed():
				failed++
				perClient[x.client]++
				if !x.start.Before(downAt) {
					t.Errorf("client %d: a request started after the router took %s out failed: %v", x.client, victim, x.reply)
				}
			case !x.start.Before(downAt) && pre == victim:
				t.Errorf("a request started after %s was out was prefilled there", victim)
			}
		}
		for c, n := range perClient {
			if n > 1 {
				t.Errorf("client %d saw %d failures, want at most 1 (its request in flight at the kill)", c, n)
			}
		}
		t.Logf("%d requests, %d failed; prefill instance %s killed %v after the load began", len(samples), failed, victim, faultAt.Sub(samples[0].start).Round(time.Millisecond))
	})

	// Load returns to zero in both halves.
	t.Run("idle", func(t *testing.T) {
		var busy []debugEntry
		idle := func() bool {
			busy = busy[:0]
			for _, e := range ps.debugInstances(t) {
				if e.Running != 0 || e.PendingTokens != 0 || e.Queued != 0 {
					busy = append(busy, e)
				}
			}
			for _, role := range []string{"prefill", "decode"} {
				if v := metricSum("http://"+ps.routers[0].admin+"/metrics", `dualmap_pd_inflight{pool="pd",role="`+role+`"}`); v != 0 {
					busy = append(busy, debugEntry{ID: "dualmap_pd_inflight " + role, Running: int(v)})
				}
			}
			return len(busy) == 0
		}
		if !waitLoad(idle) {
			t.Errorf("load held after every request ended: %+v", busy)
		}
	})
}
