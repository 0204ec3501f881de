package replay

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
)

// progressEvery is how often the progress line is redrawn.
const progressEvery = 200 * time.Millisecond

// counters count requests as they go, for the progress line.
type counters struct {
	sent, done, failed atomic.Int64
}

func (c *counters) finish(ok bool) {
	if !ok {
		c.failed.Add(1)
	}
	c.done.Add(1)
}

// startProgress draws a progress line on w (nothing if w is nil) every
// progressEvery until the returned function is called, which draws it a
// last time, ends the line and returns once the drawing goroutine has
// ended. The goroutine also ends with ctx.
func startProgress(ctx context.Context, w io.Writer, total int, c *counters) (stop func()) {
	if w == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	start := time.Now()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				drawProgress(w, total, c, time.Since(start))
			}
		}
	}()
	return func() {
		cancel()
		<-ended
		drawProgress(w, total, c, time.Since(start))
		fmt.Fprintln(w)
	}
}

func drawProgress(w io.Writer, total int, c *counters, elapsed time.Duration) {
	const width = 30
	sent, done, failed := c.sent.Load(), c.done.Load(), c.failed.Load()
	fill := width * int(done) / max(total, 1)
	fmt.Fprintf(w, "\r[%s%s] %d/%d done, %d failed, %d in flight, %s   ",
		strings.Repeat("=", fill), strings.Repeat(" ", width-fill), done, total, failed, sent-done, elapsed.Round(100*time.Millisecond))
}
