package peerbench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// The vLLM prefix-cache counters, in tokens, that vLLM, llm-d's simulator
// and `dualmap engine` serve on /metrics.
const (
	MetricPrefixHits    = "vllm:prefix_cache_hits_total"
	MetricPrefixQueries = "vllm:prefix_cache_queries_total"
)

// MetricPromptTokens is vLLM's counter of prefill tokens computed.
const MetricPromptTokens = "vllm:prompt_tokens_total"

// The request-time histograms vLLM (V1) and llm-d's simulator serve: how
// long each request waited in the engine's own queue, and its prefill.
// `dualmap engine` serves neither.
const (
	MetricQueueTime   = "vllm:request_queue_time_seconds"
	MetricPrefillTime = "vllm:request_prefill_time_seconds"
)

// EngineTimes are the sums of an engine's queue and prefill histograms,
// in seconds, and the count of its prefill histogram: the requests
// through prefill.
type EngineTimes struct {
	QueueSeconds, PrefillSeconds, Prefilled float64
}

// Add returns the figures of two engines together.
func (e EngineTimes) Add(o EngineTimes) EngineTimes {
	return EngineTimes{e.QueueSeconds + o.QueueSeconds, e.PrefillSeconds + o.PrefillSeconds, e.Prefilled + o.Prefilled}
}

// Sub returns what grew since before.
func (e EngineTimes) Sub(before EngineTimes) EngineTimes {
	return EngineTimes{e.QueueSeconds - before.QueueSeconds, e.PrefillSeconds - before.PrefillSeconds, e.Prefilled - before.Prefilled}
}

// PerRequest is the mean queue and prefill time, in milliseconds, of the
// requests through prefill (a request that never waited counts as 0 of
// queue: llm-d's simulator observes the queue histogram only for those
// that waited); nil without any.
func (e EngineTimes) PerRequest() *EngineTimesMS {
	if !(e.Prefilled >= 1) {
		return nil
	}
	return &EngineTimesMS{QueueMS: 1000 * e.QueueSeconds / e.Prefilled, PrefillMS: 1000 * e.PrefillSeconds / e.Prefilled}
}

// EngineTimesMS is where a run's TTFT went inside the engines: the mean
// wait in their queues and the mean prefill, per request, milliseconds.
type EngineTimesMS struct {
	QueueMS   float64 `json:"queue_ms"`
	PrefillMS float64 `json:"prefill_ms"`
}

// ParseEngineTimes reads the histograms of EngineTimes from a Prometheus
// text page; ok is false when the page has no prefill histogram. A
// negative or non-finite sum is an error.
func ParseEngineTimes(page []byte) (t EngineTimes, ok bool, err error) {
	for _, m := range []struct {
		name string
		v    *float64
		need bool
	}{
		{MetricPrefillTime + "_count", &t.Prefilled, true},
		{MetricPrefillTime + "_sum", &t.PrefillSeconds, true},
		{MetricQueueTime + "_sum", &t.QueueSeconds, false},
	} {
		v, found, err := ParseCounter(bytes.NewReader(page), m.name)
		switch {
		case err != nil:
			return EngineTimes{}, false, err
		case !found && m.need:
			return EngineTimes{}, false, nil
		case v < 0 || math.IsInf(v, 0) || math.IsNaN(v):
			return EngineTimes{}, false, fmt.Errorf("peerbench: metrics: %s = %v", m.name, v)
		}
		*m.v = v
	}
	return t, true, nil
}

// ParseCounter sums the samples named name (over every label set) on a
// Prometheus text page; ok is false when the page has none.
func ParseCounter(r io.Reader, name string) (sum float64, ok bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				return 0, false, fmt.Errorf("peerbench: metrics: unterminated labels in %q", line)
			}
			rest = rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // another metric whose name starts with name
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false, fmt.Errorf("peerbench: metrics: no value in %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("peerbench: metrics: %q: %w", line, err)
		}
		sum, ok = sum+v, true
	}
	if err := sc.Err(); err != nil {
		return 0, false, fmt.Errorf("peerbench: metrics: %w", err)
	}
	return sum, ok, nil
}

// ErrNoCacheCounters is ParseCacheCounters' error for a page without the
// counters. vLLM-format engines with labelled counters (llm-d's simulator)
// publish them only once a request has been counted, so before the first
// request an engine may have none; an engine that never shows them does
// not report its cache.
var ErrNoCacheCounters = errors.New("no prefix-cache counters")

// CacheCounters are an engine's prefix-cache counters at one time: tokens
// found cached and tokens looked up.
type CacheCounters struct {
	Hits, Queries float64
}

// Add returns the sum of two engines' counters.
func (c CacheCounters) Add(o CacheCounters) CacheCounters {
	return CacheCounters{c.Hits + o.Hits, c.Queries + o.Queries}
}

// Sub returns the counters' growth since before.
func (c CacheCounters) Sub(before CacheCounters) CacheCounters {
	return CacheCounters{c.Hits - before.Hits, c.Queries - before.Queries}
}

// HitRate is Hits / Queries, 0 when nothing was queried.
func (c CacheCounters) HitRate() float64 {
	if c.Queries <= 0 {
		return 0
	}
	return c.Hits / c.Queries
}

// ParseCacheCounters reads the prefix-cache counters from a Prometheus text
// page, summed over every label set (one per model or engine). A page
// without them is an error: the engine does not report its cache.
func ParseCacheCounters(r io.Reader) (CacheCounters, error) {
	var c CacheCounters
	var seenH, seenQ bool
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		var dst *float64
		switch name {
		case MetricPrefixHits:
			dst, seenH = &c.Hits, true
		case MetricPrefixQueries:
			dst, seenQ = &c.Queries, true
		default:
			continue
		}
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				return CacheCounters{}, fmt.Errorf("peerbench: metrics: unterminated labels in %q", line)
			}
			rest = rest[end+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return CacheCounters{}, fmt.Errorf("peerbench: metrics: no value in %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return CacheCounters{}, fmt.Errorf("peerbench: metrics: %q: %w", line, err)
		}
		*dst += v
	}
	if err := sc.Err(); err != nil {
		return CacheCounters{}, fmt.Errorf("peerbench: metrics: %w", err)
	}
	if !seenH || !seenQ {
		return CacheCounters{}, fmt.Errorf("peerbench: metrics: %w: no %s and %s on the page", ErrNoCacheCounters, MetricPrefixHits, MetricPrefixQueries)
	}
	return c, nil
}

// MetricQueueWait is dualmap's router-queue wait histogram, in seconds.
const MetricQueueWait = "dualmap_queue_wait_seconds"

// ParseQueueStats reads what dualmap's router queue held from its admin
// /metrics page: the requests counted by MetricQueueWait beyond its first
// bucket (le="0.005", 5 ms) and the mean wait of all of them, summed over
// pools. A page without the histogram is an error wrapping
// ErrNoQueueMetrics.
func ParseQueueStats(r io.Reader) (QueueStats, error) {
	var sum, count, fast float64
	var seenSum, seenCount, seenFast bool
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, MetricQueueWait+"_") {
			continue
		}
		name, labels, value := line, "", ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, value = line[:i], line[i:]
		}
		if strings.HasPrefix(value, "{") {
			end := strings.LastIndexByte(value, '}')
			if end < 0 {
				return QueueStats{}, fmt.Errorf("peerbench: metrics: unterminated labels in %q", line)
			}
			labels, value = value[1:end], value[end+1:]
		}
		f := strings.Fields(value)
		if len(f) == 0 {
			return QueueStats{}, fmt.Errorf("peerbench: metrics: no value in %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return QueueStats{}, fmt.Errorf("peerbench: metrics: %q: %w", line, err)
		}
		switch name {
		case MetricQueueWait + "_sum":
			sum, seenSum = sum+v, true
		case MetricQueueWait + "_count":
			count, seenCount = count+v, true
		case MetricQueueWait + "_bucket":
			if strings.Contains(labels, `le="0.005"`) {
				fast, seenFast = fast+v, true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return QueueStats{}, fmt.Errorf("peerbench: metrics: %w", err)
	}
	if !seenSum || !seenCount || !seenFast {
		return QueueStats{}, fmt.Errorf("peerbench: metrics: %w: no %s sum, count and 5 ms bucket on the page", ErrNoQueueMetrics, MetricQueueWait)
	}
	if fast < 0 || count < fast || count > 1e15 || !(sum >= 0) || math.IsInf(sum, 0) {
		return QueueStats{}, fmt.Errorf("peerbench: metrics: %s: count %v, 5 ms bucket %v, sum %v do not add up", MetricQueueWait, count, fast, sum)
	}
	q := QueueStats{Requests: int(count), Held: int(count - fast)}
	if count > 0 {
		q.MeanWaitMS = 1000 * sum / count
	}
	return q, nil
}

// ErrNoQueueMetrics is ParseQueueStats' error for a page without the
// router queue's histogram (a picker other than dualmap).
var ErrNoQueueMetrics = errors.New("no router-queue metrics")
