package extproc

import (
	"sync/atomic"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// bounds hold the router's memory across streams to limits.max_streams
// streams at once and limits.max_buffered_bytes request body bytes held by
// all of them together. Safe for concurrent use; nothing blocks: what does
// not fit is refused at once.
type bounds struct {
	maxStreams, maxBuffered int64
	streams                 atomic.Int64 // streams admitted and not yet ended
	buffered                atomic.Int64 // body bytes the streams hold
}

// take adds n to v unless that would put it above limit.
func take(v *atomic.Int64, n, limit int64) bool {
	for {
		cur := v.Load()
		if cur+n > limit {
			return false
		}
		if v.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// admit takes a stream slot; the stream gives it back with leave.
func (b *bounds) admit() bool { return take(&b.streams, 1, b.maxStreams) }

func (b *bounds) leave() { b.streams.Add(-1) }

// reserve takes n body bytes from the budget; they are given back with
// release.
func (b *bounds) reserve(n int) bool { return take(&b.buffered, int64(n), b.maxBuffered) }

func (b *bounds) release(n int) { b.buffered.Add(-int64(n)) }

// Limits whose rejections are counted, by their configuration keys.
const (
	limitStreams  = "max_streams"
	limitBuffered = "max_buffered_bytes"
	limitBody     = "max_body_bytes"
)

// registerBounds exports b's load as gauges read at scrape time.
func registerBounds(reg prometheus.Registerer, b *bounds) {
	if reg == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "dualmap_streams", Help: "ext_proc streams being served (one per HTTP request, for its whole life); at most limits.max_streams.",
		}, func() float64 { return float64(b.streams.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "dualmap_buffered_body_bytes", Help: "Request body bytes the streams hold until their requests are routed; at most limits.max_buffered_bytes.",
		}, func() float64 { return float64(b.buffered.Load()) }),
	)
}

// turnAwayWait is how long a stream over limits.max_streams may take to send
// its first message (Envoy sends the request headers as it opens the
// stream) before it is ended with RESOURCE_EXHAUSTED instead of a 429.
const turnAwayWait = time.Second

// turnAway ends a stream over limits.max_streams without serving it. The
// request headers, when they come first and within turnAwayWait, get a
// 429 immediate response, which the client sees whatever Envoy's
// failure_mode_allow; anything else ends the stream with RESOURCE_EXHAUSTED,
// which Envoy turns into its status_on_error (500 by default) or, with
// failure_mode_allow, into forwarding the request unrouted. Either way the
// stream holds its goroutine for at most turnAwayWait.
func (s *Server) turnAway(srv extprocv3.ExternalProcessor_ProcessServer) error {
	s.m.rejections.WithLabelValues(limitStreams).Inc()
	first := make(chan *extprocv3.ProcessingRequest, 1)
	go func() {
		req, err := srv.Recv() // returns when the stream ends, if not before
		if err != nil {
			req = nil
		}
		first <- req
	}()
	t := time.NewTimer(turnAwayWait)
	defer t.Stop()
	select {
	case req := <-first:
		if req == nil {
			return nil // the client left
		}
		if req.GetRequestHeaders() == nil {
			break
		}
		e := classify(errTooManyStreams, time.Second)
		s.m.errors.WithLabelValues(e.kind).Inc()
		s.log.Debug("stream turned away", "limit", "limits.max_streams", "status", e.status)
		return srv.Send(immediate(e))
	case <-t.C:
	case <-srv.Context().Done():
		return nil
	}
	s.m.errors.WithLabelValues(kindTooManyStreams).Inc()
	s.log.Debug("stream turned away", "limit", "limits.max_streams", "code", codes.ResourceExhausted)
	return status.Error(codes.ResourceExhausted, "extproc: too many streams (limits.max_streams)")
}
