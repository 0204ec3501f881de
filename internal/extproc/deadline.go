package extproc

import (
	"context"
	"errors"
	"net"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// Deadlines on a stream's messages. A stream's goroutine does not read the
// gRPC stream itself: a receiver does, so that the stream can stop waiting
// for a message that does not come. While a request body is arriving
// (phaseRequestBody) the body must end within limits.body_timeout of its
// headers; past it the request gets 408 and the stream ends, giving back
// the bytes it held. A client that sends all but the last bytes of a
// declared body and then idles thus holds its share of the body budget for
// body_timeout, not for as long as it likes.

// errBodyTimeout is the 408 of a body that did not end in time.
var errBodyTimeout = errors.New("extproc: the request body did not arrive within limits.body_timeout")

const kindBodyTimeout = "body_timeout"

// errDeadline is what receiver.recv returns when the deadline passed first.
var errDeadline = errors.New("extproc: deadline passed")

// received is one Recv's result.
type received struct {
	req *extprocv3.ProcessingRequest
	err error
}

// receiver reads one ext_proc stream on a goroutine of its own and hands
// each message over to the stream's goroutine, which can stop waiting.
// The goroutine ends with the stream (Recv fails once the handler has
// returned) or when stop is called.
type receiver struct {
	ctx   context.Context
	msgs  chan received
	done  chan struct{}
	timer *time.Timer
}

func newReceiver(srv extprocv3.ExternalProcessor_ProcessServer) *receiver {
	r := &receiver{ctx: srv.Context(), msgs: make(chan received), done: make(chan struct{})}
	go func() {
		for {
			req, err := srv.Recv()
			select {
			case r.msgs <- received{req, err}:
			case <-r.done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return r
}

// recv returns the next message, or errDeadline when deadline (if not
// zero) passes first, or the stream context's error when it ends.
func (r *receiver) recv(deadline time.Time) (*extprocv3.ProcessingRequest, error) {
	if deadline.IsZero() {
		select {
		case m := <-r.msgs:
			return m.req, m.err
		case <-r.ctx.Done():
			return nil, r.ctx.Err()
		}
	}
	d := time.Until(deadline)
	if d <= 0 {
		return nil, errDeadline
	}
	if r.timer == nil {
		r.timer = time.NewTimer(d)
	} else {
		r.timer.Reset(d)
	}
	defer r.timer.Stop()
	select {
	case m := <-r.msgs:
		return m.req, m.err
	case <-r.timer.C:
		return nil, errDeadline
	case <-r.ctx.Done():
		return nil, r.ctx.Err()
	}
}

// stop lets the goroutine go: it ends at its next message or the stream's
// end.
func (r *receiver) stop() { close(r.done) }

// deadline is when the stream stops waiting for its next message; zero:
// it waits as long as the stream lasts. Each phase has its bound:
// the first message within limits.first_message_timeout of the stream's
// start (Envoy sends the request headers at once), the body within
// limits.body_timeout of the headers, and once the request went upstream
// each next message (response headers, chunks) within limits.idle_timeout
// of the last. Envoy's own timeouts end a request before these do in the
// shipped configs (request_timeout 60s, stream_idle_timeout 300s): they
// bound what reaches the router without Envoy, or past a misconfigured
// one.
func (st *stream) deadline(now time.Time) time.Time {
	lim := &st.s.cfg.Limits
	switch st.phase {
	case phaseRequestHeaders:
		if lim.FirstMessageTimeout > 0 {
			return st.opened.Add(lim.FirstMessageTimeout)
		}
	case phaseRequestBody:
		if lim.BodyTimeout > 0 {
			return st.bodyStart.Add(lim.BodyTimeout)
		}
	default:
		if lim.IdleTimeout > 0 {
			return now.Add(lim.IdleTimeout)
		}
	}
	return time.Time{}
}

// errStreamIdle ends a stream whose first or next message did not
// come in time.
var errStreamIdle = status.Error(codes.DeadlineExceeded, "extproc: no message within the stream's deadline (limits.first_message_timeout, limits.idle_timeout)")

// expired handles a stream whose deadline passed: 408 to a request whose
// body did not end in time (Process sends it, then ends the stream), or
// else the stream ends with DEADLINE_EXCEEDED (nil answer).
func (st *stream) expired() *extprocv3.ProcessingResponse {
	switch st.phase {
	case phaseRequestBody:
		st.s.m.rejections.WithLabelValues(limitBodyTimeout).Inc()
		return st.fail(errBodyTimeout)
	case phaseRequestHeaders:
		st.s.m.rejections.WithLabelValues(limitFirstMessage).Inc()
	default:
		st.s.m.rejections.WithLabelValues(limitIdle).Inc()
	}
	st.phase = phaseFailed
	return nil
}

// sourceAttribute is the request attribute that names the downstream
// client, under the ext_proc filter's namespace in the first message's
// attributes (request_attributes: [source.address] in the filter).
const (
	attributeNamespace = "envoy.filters.http.ext_proc"
	sourceAttribute    = "source.address"
)

// clientAddress is the client's IP (the port dropped: a client is its
// address, not one of its connections) from the attributes Envoy sent, or
// "" when Envoy sent none.
func clientAddress(attrs map[string]*structpb.Struct) string {
	v := attrs[attributeNamespace].GetFields()[sourceAttribute].GetStringValue()
	if v == "" {
		return ""
	}
	if host, _, err := net.SplitHostPort(v); err == nil {
		return host
	}
	return v
}
