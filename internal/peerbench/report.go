package peerbench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Row is one run of the benchmark: a picker with its replicas on an engine
// at a rate, on a workload.
type Row struct {
	Engine   string  `json:"engine"`
	Workload string  `json:"workload"`
	Picker   string  `json:"picker"`
	Replicas int     `json:"replicas"`
	Client   string  `json:"client"`
	Percent  float64 `json:"percent_of_capacity"`
	QPS      float64 `json:"qps"`
	Run      int     `json:"run"`

	Requests int         `json:"requests"`
	OK       int         `json:"ok"`
	Failed   int         `json:"failed"`
	ByStatus map[int]int `json:"failed_by_status,omitempty"` // failed requests by HTTP status (0: no response)

	TTFTP50MS float64 `json:"ttft_p50_ms"`
	TTFTP90MS float64 `json:"ttft_p90_ms"`
	TTFTP99MS float64 `json:"ttft_p99_ms"`
	E2EP50MS  float64 `json:"e2e_p50_ms"`
	OutputTPS float64 `json:"output_tokens_per_s"`
	// EngineHitRate is the growth of the engines' prefix-cache hit and
	// query counters over the run, summed over engines.
	EngineHitRate float64 `json:"engine_hit_rate"`
	// EnginePrefill is each engine's growth of MetricPromptTokens over the
	// run (the prefill tokens it computed), in the engines' order.
	EnginePrefill []float64 `json:"engine_prefill_tokens,omitempty"`
	// PickerCPUMSPerRequest is the pickers' CPU time (utime+stime, all
	// replicas) over the run per request sent.
	PickerCPUMSPerRequest float64 `json:"picker_cpu_ms_per_request"`
	// EngineCPU is the engines' CPU time over the run divided by its wall
	// time: how many cores the engines used.
	EngineCPU float64 `json:"engine_cpu_cores"`
	LoadAvg   string  `json:"load_avg"`
	Duration  float64 `json:"duration_s"`
	// Queue is what dualmap's router queue held over the run (nil for a
	// picker that does not report it).
	Queue *QueueStats `json:"router_queue,omitempty"`
	// EngineTimes is the engines' mean queue wait and prefill per request
	// over the run, from their histograms (nil for an engine that does
	// not serve them).
	EngineTimes *EngineTimesMS `json:"engine_times,omitempty"`
}

// QueueStats are a run's router-queue figures, from dualmap's
// dualmap_queue_wait_seconds histogram: the requests it counted, those
// that waited longer than its first bucket (5 ms) and the mean wait over
// every request.
type QueueStats struct {
	Requests   int     `json:"requests"`
	Held       int     `json:"held"`
	MeanWaitMS float64 `json:"mean_wait_ms"`
}

// Add returns the figures of two replicas together.
func (q QueueStats) Add(o QueueStats) QueueStats {
	s := QueueStats{Requests: q.Requests + o.Requests, Held: q.Held + o.Held}
	if s.Requests > 0 {
		s.MeanWaitMS = (q.MeanWaitMS*float64(q.Requests) + o.MeanWaitMS*float64(o.Requests)) / float64(s.Requests)
	}
	return s
}

// MS is a duration in milliseconds, for Row.
func MS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Markdown writes rows as a Markdown table, grouped as they come (engine,
// workload, replicas, rate, picker), with the failed requests by status.
func Markdown(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| engine | workload | picker | replicas | load | QPS | run | TTFT p50 / p90 / p99 ms | E2E p50 ms | out tok/s | failed (status) | engine hit | engine queue / prefill ms | picker CPU ms/req | engines' cores | load avg |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		times := "-"
		if e := r.EngineTimes; e != nil {
			times = thousands(e.QueueMS) + " / " + thousands(e.PrefillMS)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %.0f%% | %.1f | %d | %s / %s / %s | %s | %.0f | %s | %.1f%% | %s | %.2f | %.2f | %s |\n",
			r.Engine, r.Workload, r.Picker, r.Replicas, r.Percent, r.QPS, r.Run,
			thousands(r.TTFTP50MS), thousands(r.TTFTP90MS), thousands(r.TTFTP99MS), thousands(r.E2EP50MS),
			r.OutputTPS, failed(r), 100*r.EngineHitRate, times, r.PickerCPUMSPerRequest, r.EngineCPU, r.LoadAvg)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func failed(r Row) string {
	if r.Failed == 0 {
		return "0"
	}
	var parts []string
	codes := make([]int, 0, len(r.ByStatus))
	for c := range r.ByStatus {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d x %d", r.ByStatus[c], c))
	}
	return fmt.Sprintf("%d (%s)", r.Failed, strings.Join(parts, ", "))
}

// thousands formats a millisecond figure as a whole number with commas.
func thousands(ms float64) string {
	n := int64(ms + 0.5)
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// PrefillSkew is the busiest engine's prefill tokens over the mean of all
// engines' (1: an even split); 0 without figures.
func (r Row) PrefillSkew() float64 {
	var sum, top float64
	for _, v := range r.EnginePrefill {
		sum += v
		top = max(top, v)
	}
	if sum <= 0 {
		return 0
	}
	return top / (sum / float64(len(r.EnginePrefill)))
}
