package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/dualmap/dualmap/internal/sim/trace"
)

// Run replays tr against opt.URL and returns the result of every request
// sent, in trace order, and their summary.
//
// It replays the first opt.Requests requests of tr (all if 0), at their
// arrival times rescaled to opt.QPS (if > 0), in real time from its start;
// tr itself is not modified. A request's prompt is synthesised by a
// Prompter (seed opt.Seed, tr.BlockSize tokens per block, or
// trace.DefaultBlockSize if 0, scaled by opt.ScaleTokens) from its blocks,
// and max_tokens is its output length scaled and capped by opt.MaxOutput,
// at least 1. A request's input length is likewise scaled, at least 1
// token.
//
// Run returns once every request sent has finished. If ctx ends first, no
// further request is sent, requests in flight are cancelled (their results
// say "cancelled") and Run returns the results so far with an error
// wrapping ctx's error. Failed requests are not an error of Run: they are
// in the results and counted in the summary. Invalid options give an error
// wrapping ErrInvalidOptions and no results.
func Run(ctx context.Context, tr *trace.Trace, opt Options) ([]Result, Summary, error) {
	o, target, err := opt.resolve()
	if err != nil {
		return nil, Summary{}, err
	}
	if tr == nil {
		return nil, Summary{}, fmt.Errorf("replay: %w: nil trace", ErrInvalidOptions)
	}
	items, qps, err := schedule(tr, o)
	if err != nil {
		return nil, Summary{}, err
	}
	blockSize := tr.BlockSize
	if blockSize <= 0 {
		blockSize = trace.DefaultBlockSize
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns = o.Concurrency
	transport.MaxIdleConnsPerHost = o.Concurrency
	transport.DisableCompression = true // a gzipped stream would be timed as gzip flushes it
	defer transport.CloseIdleConnections()
	s := &sender{
		client:   &http.Client{Transport: transport},
		url:      target,
		opt:      o,
		prompter: NewPrompter(o.Seed, blockSize, o.ScaleTokens),
	}
	var c counters
	stop := startProgress(ctx, o.Progress, len(items), &c)
	results, err := dispatch(ctx, s, items, o.Concurrency, &c)
	stop()
	sum := Summarize(results)
	sum.TargetQPS = qps
	return results, sum, err
}

// schedule returns the requests to send, with scaled arrivals and token
// counts, and their mean arrival rate.
func schedule(tr *trace.Trace, o Options) ([]item, float64, error) {
	n := len(tr.Requests)
	if o.Requests > 0 && o.Requests < n {
		n = o.Requests
	}
	c := trace.Trace{Requests: slices.Clone(tr.Requests[:n]), BlockSize: tr.BlockSize}
	if o.QPS > 0 && n >= 2 {
		if err := c.ScaleToQPS(o.QPS); err != nil {
			return nil, 0, fmt.Errorf("replay: %w", err)
		}
	}
	items := make([]item, n)
	for i, r := range c.Requests {
		out := int(math.Round(float64(r.OutputTokens) * o.ScaleTokens))
		if o.MaxOutput > 0 {
			out = min(out, o.MaxOutput)
		}
		items[i] = item{
			arrival:     r.Arrival - c.Requests[0].Arrival,
			blocks:      r.Blocks,
			inputTokens: max(1, int(math.Round(float64(r.InputTokens)*o.ScaleTokens))),
			maxTokens:   max(1, out),
		}
	}
	qps := o.QPS
	if n >= 2 && items[n-1].arrival > 0 && qps == 0 {
		qps = float64(n-1) / items[n-1].arrival.Seconds()
	}
	return items, qps, nil
}

// dispatch sends items at their arrival times, at most concurrency at a
// time, and returns the results of those sent once all have finished.
func dispatch(ctx context.Context, s *sender, items []item, concurrency int, c *counters) ([]Result, error) {
	results := make([]Result, len(items))
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	start := time.Now()
	var queueFreed time.Time // when the last delayed arrival got its slot
	sent := 0
loop:
	for i, it := range items {
		if d := time.Until(start.Add(it.arrival)); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				break loop
			case <-timer.C:
			}
		}
		// Delayed: no free slot, or it arrived while an earlier arrival
		// was still waiting for one.
		delayed := start.Add(it.arrival).Before(queueFreed)
		select {
		case sem <- struct{}{}:
		default:
			delayed = true
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				break loop
			}
		}
		if delayed {
			queueFreed = time.Now()
		}
		if ctx.Err() != nil {
			<-sem
			break
		}
		sent++
		c.sent.Add(1)
		at := time.Since(start)
		wg.Go(func() {
			defer func() { <-sem }()
			r := s.send(ctx, it)
			r.Index, r.Sent, r.Delay, r.Delayed = i, at, at-it.arrival, delayed
			results[i] = r
			c.finish(r.OK())
		})
	}
	wg.Wait()
	results = results[:sent]
	if ctx.Err() != nil && (sent < len(items) || slices.ContainsFunc(results, func(r Result) bool { return r.Err == "cancelled" })) {
		err := fmt.Errorf("replay: stopped after sending %d of %d requests: %w", sent, len(items), ctx.Err())
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, ctx.Err()) {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
		return results, err
	}
	return results, nil
}
