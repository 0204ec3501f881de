//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/replay"
	"github.com/dualmap/dualmap/internal/sim/trace"
)

// The soak's shape. The engines and prompts are the trace replay's (engines
// 20 times faster than the profile, prompts at a quarter of the trace's
// size, at most 32 output tokens); the rate is a steady soakQPS, below the
// replay's 20, so that four engines are busy but not saturated.
const (
	soakQPS            = 15
	soakWarmup         = 30 * time.Second // of load before the baseline sample
	soakSampleEvery    = 10 * time.Second
	soakRedisDown      = 3 * time.Second // from kill to restart
	soakSettle         = 5 * time.Second // idle time before an idle sample
	soakGoroutineSlack = 10              // goroutines an idle router may gain over the run
	soakMemSlack       = 8 << 20         // bytes of heap a router may gain and still be flat
)

// soakTracePath is the full conversation trace when the machine has it.
const soakTracePath = "/work/shared/traces/conversation_trace.jsonl"

// routerCodes are the error codes of the router's own shedding answers
// (internal/extproc classify): a 429 or 503 carrying one of them is a
// request shed with a status, not lost.
var routerCodes = []string{"no_healthy_upstream", "queue_timeout", "slo_unreachable", "too_many_streams", "buffer_full"}

// TestSoakReport replays the conversation trace through Envoy and three
// routers sharing one Redis, in front of four engines, at a steady
// soakQPS for DUALMAP_SOAK_DURATION (default 10m), killing Redis and
// restarting it on the same port at a third and two thirds of the run.
// Every soakSampleEvery it logs each router's goroutines, heap in use and
// resident memory; at the end it reports the requests sent, succeeded,
// shed with a status and lost, and each router's numbers when idle after
// a warm-up, under load mid-run, and idle after the run, and whether the
// end is flat (within 20% or soakMemSlack) against the first two. Memory
// grows until the routers' bounded caches are full: the per-message token
// cache (8 Mi tokens, some 34 MB on these prompts, full after about 2,700
// messages per router, some 9 minutes at soakQPS over three routers) and
// the KV-cache indexes; flat memory needs DUALMAP_SOAK_DURATION past that.
//
// A report, not part of make test: it runs only with DUALMAP_SOAK=1 (make
// soak). When it runs it fails if a request was lost (a transport error,
// an error inside a 2xx stream, or any status but the router's 429/503
// with its error body) or if an idle router ends with more than
// soakGoroutineSlack goroutines over its idle baseline. Memory is reported
// as flat or not, not asserted.
func TestSoakReport(t *testing.T) {
	if os.Getenv("DUALMAP_SOAK") == "" {
		t.Skip("set DUALMAP_SOAK=1 (make soak) to run the soak")
	}
	duration := 10 * time.Minute
	if v := os.Getenv("DUALMAP_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("DUALMAP_SOAK_DURATION=%q: want a positive duration such as 10m", v)
		}
		duration = d
	}
	warm := soakTrace(t, int(soakWarmup.Seconds()*soakQPS), 0)
	soak := soakTrace(t, int(duration.Seconds()*soakQPS), len(warm.Requests))

	dir := t.TempDir()
	rd := startRedis(t, dir)
	s := startStack(t, stackOptions{routers: 3, redis: rd.addr, timeScale: replaySpeed})
	opt := replay.Options{URL: s.url, Stream: true, MaxOutput: replayMaxOutput, ScaleTokens: replayScale,
		Seed: replaySeed, Model: "dualmap-sim"}
	t.Logf("soak: %v at %d req/s (%d requests) after a %v warm-up, 3 routers, 4 engines, Redis killed for %v at 1/3 and 2/3",
		duration, soakQPS, len(soak.Requests), soakWarmup, soakRedisDown)

	// Warm-up: connections, pools and caches fill; then an idle baseline.
	warmRes, _, err := replay.Run(context.Background(), warm, opt)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(soakSettle)
	base := sampleRouters(t, s)

	// The soak proper, with Redis restarted twice and a sampler.
	var (
		mu      sync.Mutex
		samples []soakSample
		events  []string
	)
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(soakSampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				x := soakSample{at: time.Since(start), routers: sampleRouters(t, s)}
				mu.Lock()
				x.redisUp = len(events)%2 == 0
				samples = append(samples, x)
				mu.Unlock()
			}
		}
	})
	wg.Go(func() {
		for i := 1; i <= 2; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(duration * time.Duration(i) / 3))):
			}
			mu.Lock()
			events = append(events, fmt.Sprintf("%v Redis killed", time.Since(start).Round(time.Second)))
			mu.Unlock()
			rd.p.killNow()
			time.Sleep(soakRedisDown)
			rd.start()
			mu.Lock()
			events = append(events, fmt.Sprintf("%v Redis restarted", time.Since(start).Round(time.Second)))
			mu.Unlock()
		}
	})
	results, sum, err := replay.Run(context.Background(), soak, opt)
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(soakSettle)
	end := sampleRouters(t, s)

	// Counts.
	var ok, shed, lost int
	lostWhy := map[string]int{}
	shedWhy := map[string]int{}
	for _, r := range append(warmRes, results...) {
		switch c := shedCode(r); {
		case r.OK():
			ok++
		case c != "":
			shed++
			shedWhy[fmt.Sprintf("%d %s", r.Status, c)]++
		default:
			lost++
			lostWhy[fmt.Sprintf("status %d: %.80s", r.Status, r.Err)]++
		}
	}

	// The table.
	var b strings.Builder
	fmt.Fprintf(&b, "\n%8s %-5s", "t", "redis")
	for i := range s.routers {
		fmt.Fprintf(&b, " | r%d gor  heap MB  RSS MB", i)
	}
	b.WriteString("\n")
	row := func(label, redis string, rs []routerSample) {
		fmt.Fprintf(&b, "%8s %-5s", label, redis)
		for _, x := range rs {
			fmt.Fprintf(&b, " | %6d %8.1f %7.1f", x.goroutines, mb(x.heapInuse), mb(x.rss))
		}
		b.WriteString("\n")
	}
	row("base", "up", base)
	for _, x := range samples {
		row(x.at.Round(time.Second).String(), map[bool]string{true: "up", false: "DOWN"}[x.redisUp], x.routers)
	}
	row("end", "up", end)
	t.Logf("router samples (base: idle after the warm-up; end: idle %v after the run):%s", soakSettle, b.String())
	t.Logf("Redis: %s", strings.Join(events, "; "))

	mid := base
	if len(samples) > 0 {
		mid = samples[len(samples)/2].routers
	}
	for i := range s.routers {
		b0, m, e := base[i], mid[i], end[i]
		t.Logf("router %d: goroutines %d / %d / %d, heap in use %.1f / %.1f / %.1f MB, RSS %.1f / %.1f / %.1f MB (base / mid-run / end); "+
			"base to end: goroutines %s, heap %s, RSS %s; mid-run to end: heap %s, RSS %s",
			i, b0.goroutines, m.goroutines, e.goroutines, mb(b0.heapInuse), mb(m.heapInuse), mb(e.heapInuse),
			mb(b0.rss), mb(m.rss), mb(e.rss),
			flat(float64(b0.goroutines), float64(e.goroutines), soakGoroutineSlack),
			flat(b0.heapInuse, e.heapInuse, soakMemSlack), flat(b0.rss, e.rss, soakMemSlack),
			flat(m.heapInuse, e.heapInuse, soakMemSlack), flat(m.rss, e.rss, soakMemSlack))
		if e.goroutines > b0.goroutines+soakGoroutineSlack {
			t.Errorf("router %d: %d goroutines idle after the soak, %d after the warm-up: more than %d gained",
				i, e.goroutines, b0.goroutines, soakGoroutineSlack)
		}
	}
	sent := len(warmRes) + len(results)
	t.Logf("requests: %d sent (%d warm-up), %d succeeded, %d shed with a status %v, %d lost %v",
		sent, len(warmRes), ok, shed, shedWhy, lost, lostWhy)
	t.Logf("soak proper: %.1f req/s achieved, TTFT p50 %v p90 %v p99 %v, hit rate %.1f%%, statuses %v",
		sum.AchievedQPS, sum.TTFT.P50.Round(time.Millisecond), sum.TTFT.P90.Round(time.Millisecond),
		sum.TTFT.P99.Round(time.Millisecond), 100*sum.HitRate, sum.ByStatus)
	if lost > 0 {
		t.Errorf("%d of %d requests lost (neither served nor shed with the router's status)", lost, sent)
	}
}

// soakTrace returns n requests of the conversation trace (the full trace if
// present, else the e2e slice, looped with fresh block ids per lap when it
// is too short), starting at request skip, at a steady soakQPS.
func soakTrace(t *testing.T, n, skip int) *trace.Trace {
	t.Helper()
	path := soakTracePath
	if _, err := os.Stat(path); err != nil {
		path = filepath.Join(repoRoot, "e2e", "testdata", "conversation_240.jsonl")
	}
	src, err := trace.ReadFile(path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := &trace.Trace{BlockSize: src.BlockSize, Source: src.Source}
	for i := range n {
		k := skip + i
		lap, r := uint64(k/len(src.Requests)), src.Requests[k%len(src.Requests)]
		blocks := make([]uint64, len(r.Blocks))
		for j, id := range r.Blocks {
			blocks[j] = id ^ lap<<56 // laps share no prefix
		}
		out.Requests = append(out.Requests, trace.Request{
			Arrival:      time.Duration(i) * time.Second / soakQPS,
			InputTokens:  r.InputTokens,
			OutputTokens: r.OutputTokens,
			Blocks:       blocks,
		})
	}
	return out
}

type soakSample struct {
	at      time.Duration
	redisUp bool
	routers []routerSample
}

type routerSample struct {
	goroutines     int
	heapInuse, rss float64
}

// sampleRouters reads each router's Go runtime metrics from its admin
// /metrics; a router that does not answer gives -1 goroutines.
func sampleRouters(t *testing.T, s *stack) []routerSample {
	out := make([]routerSample, len(s.routers))
	for i, r := range s.routers {
		m, err := scrape("http://" + r.admin + "/metrics")
		if err != nil {
			t.Logf("router %d metrics: %v", i, err)
			out[i].goroutines = -1
			continue
		}
		out[i] = routerSample{goroutines: int(m["go_goroutines"]), heapInuse: m["go_memstats_heap_inuse_bytes"],
			rss: m["process_resident_memory_bytes"]}
	}
	return out
}

// scrape returns the unlabelled samples of a Prometheus text exposition.
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			m[name] = v
		}
	}
	return m, sc.Err()
}

// shedCode returns the router's error code if r was shed by the router: a
// 429 or 503 whose body is the router's OpenAI-style error with one of
// routerCodes. Otherwise "".
func shedCode(r replay.Result) string {
	if r.Status != 429 && r.Status != 503 {
		return ""
	}
	for _, c := range routerCodes {
		if strings.Contains(r.Err, `"code":"`+c+`"`) {
			return c
		}
	}
	return ""
}

// flat says whether end is within 20% or slack of base.
func flat(base, end, slack float64) string {
	if end <= base+max(slack, 0.2*base) {
		return "flat"
	}
	return fmt.Sprintf("GREW %+.0f%%", 100*(end-base)/max(base, 1))
}

func mb(b float64) float64 { return b / (1 << 20) }
