//go:build e2e

package e2e

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// bodyGen makes request bodies of about size bytes that all differ from the
// first token on: identical bodies would all go to one instance (prefix
// affinity) and measure that instance, not the router. A template is
// marshalled once; each body is a copy with a 16-hex-digit counter written
// over a placeholder at the start of the system prompt.
type bodyGen struct {
	tmpl []byte
	at   int
	n    atomic.Uint64
	salt uint64
}

const bodyMark = "@@@@@@@@@@@@@@@@"

func newBodyGen(t testing.TB, size int, salt uint64) *bodyGen {
	t.Helper()
	filler := "Varied benchmark prompt text about freight schedules and routes. "
	var sys strings.Builder
	sys.WriteString(bodyMark + " ")
	for sys.Len() < size-160 {
		sys.WriteString(filler)
	}
	tmpl := chatBody(sys.String()[:max(size-160, len(bodyMark)+1)], "hi", false, 1)
	at := bytes.Index(tmpl, []byte(bodyMark))
	if at < 0 {
		t.Fatal("bodyGen: placeholder lost in marshalling")
	}
	return &bodyGen{tmpl: tmpl, at: at, salt: salt << 40}
}

func (g *bodyGen) next() []byte {
	b := slices.Clone(g.tmpl)
	var n [8]byte
	v := g.n.Add(1) ^ g.salt
	for i := range n {
		n[i] = byte(v >> (56 - 8*i))
	}
	hex.Encode(b[g.at:g.at+16], n[:])
	return b
}

// benchClient keeps enough idle connections for the closed loops (the
// default transport keeps two per host and would measure connection setup).
var benchClient = &http.Client{
	Timeout:   60 * time.Second,
	Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 30 * time.Second},
}

// benchPost sends one chat completion and reads the whole answer; it
// reports whether the answer was a 200 and which engine served it.
func benchPost(url string, body []byte) (bool, string) {
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("content-type", "application/json")
	resp, err := benchClient.Do(req)
	if err != nil {
		return false, ""
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == 200, resp.Header.Get("x-engine-name")
}

// loadResult is one load phase: latencies of the 200s, the others counted.
type loadResult struct {
	lat     []time.Duration
	failed  int64
	elapsed time.Duration
	engines map[string]int
}

func (r *loadResult) rps() float64 { return float64(len(r.lat)) / r.elapsed.Seconds() }

func (r *loadResult) add(mu *sync.Mutex, d time.Duration, ok bool, engine string) {
	mu.Lock()
	defer mu.Unlock()
	if !ok {
		r.failed++
		return
	}
	r.lat = append(r.lat, d)
	r.engines[engine]++
}

// openLoopGen sends rate requests a second for d (bodies from gen) and
// waits for them all.
func openLoopGen(url string, gen *bodyGen, rate int, d time.Duration) *loadResult {
	var mu sync.Mutex
	r := &loadResult{engines: map[string]int{}}
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	start := time.Now()
	end := start.Add(d)
	for time.Now().Before(end) {
		<-tick.C
		body := gen.next()
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			ok, eng := benchPost(url, body)
			r.add(&mu, time.Since(t0), ok, eng)
		}()
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	return r
}

// closedLoopGen runs workers clients back to back for d.
func closedLoopGen(url string, gen *bodyGen, workers int, d time.Duration) *loadResult {
	var mu sync.Mutex
	r := &loadResult{engines: map[string]int{}}
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				body := gen.next()
				t0 := time.Now()
				ok, eng := benchPost(url, body)
				r.add(&mu, time.Since(t0), ok, eng)
			}
		}()
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	return r
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuTicks is a process's utime+stime in clock ticks (/proc/<pid>/stat).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces: fields count from after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	// utime and stime are fields 14 and 15 of stat(5); f[0] is field 3.
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime/stime not numbers", pid)
	}
	return u + st, nil
}

// clockTick is USER_HZ; 100 on every Linux this runs on.
const clockTick = 100

func splitSummary(engines map[string]int) string {
	keys := make([]string, 0, len(engines))
	for k := range engines {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = strconv.Itoa(engines[k])
	}
	return strings.Join(parts, "/")
}
