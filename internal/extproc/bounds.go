package extproc

import (
	"sync"
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
	maxPerClient            int64        // limits.max_buffered_bytes_per_client; <= 0: none
	streams                 atomic.Int64 // streams admitted and not yet ended
	buffered                atomic.Int64 // body bytes the streams hold

	mu      sync.Mutex       // guards clients
	clients map[string]int64 // body bytes held by the streams of each client, none at 0
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

// reserve takes n body bytes from the budget, and from client's share of
// it when client is known (""); they are given back with release. It
// returns the limit that refused them, or "".
func (b *bounds) reserve(client string, n int) string {
	if !take(&b.buffered, int64(n), b.maxBuffered) {
		return limitBuffered
	}
	if client == "" || b.maxPerClient <= 0 {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	held := b.clients[client]
	if held+int64(n) > b.maxPerClient {
		b.buffered.Add(-int64(n))
		return limitPerClient
	}
	if b.clients == nil {
		b.clients = map[string]int64{}
	}
	b.clients[client] = held + int64(n)
	return ""
}

// release gives back n bytes reserve took for client.
func (b *bounds) release(client string, n int) {
	if n == 0 {
		return
	}
	b.buffered.Add(-int64(n))
	if client == "" || b.maxPerClient <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if held := b.clients[client] - int64(n); held > 0 {
		b.clients[client] = held
	} else {
		delete(b.clients, client)
	}
}

// clientsHolding is how many clients hold body bytes.
func (b *bounds) clientsHolding() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.clients)
}

// Limits whose rejections are counted, by their configuration keys.
const (
	limitStreams  = "max_streams"
	limitBuffered = "max_buffered_bytes"
	limitBody     = "max_body_bytes"

	limitPerClient    = "max_buffered_bytes_per_client"
	limitBodyTimeout  = "body_timeout"
	limitFirstMessage = "first_message_timeout"
	limitIdle         = "idle_timeout"
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
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "dualmap_buffering_clients", Help: "Clients (by the source.address Envoy sends) whose streams hold request body bytes; each holds at most limits.max_buffered_bytes_per_client.",
		}, func() float64 { return float64(b.clientsHolding()) }),
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
