package httpengine

import (
	"encoding/json"
	"net/http"
)

// stream answers a streaming request as server-sent events: nothing until
// the first token is out, then the headers and the first token's chunk,
// one chunk per token as the engine's decode steps finish, the closing
// chunk with the finish reason, the usage chunk if asked for, and
// "data: [DONE]". It returns early, leaving the request to the engine, when
// the client goes away; if Run stops before the first token it answers 503,
// after it the stream is cut short without [DONE].
func (s *Server) stream(w http.ResponseWriter, r *http.Request, t *ticket, rep *reply) {
	ctx := r.Context()
	p := t.load()
	for !p.First {
		if !s.await(ctx, t) {
			if ctx.Err() == nil {
				writeError(w, http.StatusServiceUnavailable, "server_error", "engine stopped")
			}
			return
		}
		p = t.load()
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	ev := sse{w: w, rc: http.NewResponseController(w)}
	sent := 0
	for {
		for ; sent < p.Generated; sent++ {
			ev.data(rep.chunk(sent))
		}
		if ev.flush() != nil || p.Done {
			break
		}
		if !s.await(ctx, t) {
			return
		}
		p = t.load()
	}
	if ev.err != nil {
		return
	}
	if p.Capped {
		rep.finish = "length" // as vLLM, at max_model_len
	}
	ev.data(rep.chunk(rep.output))
	if rep.includeUsage {
		ev.data(rep.usageChunk(p))
	}
	ev.done()
	ev.flush()
}

// sse writes server-sent events; after the first write error it writes
// nothing more and keeps the error.
type sse struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

// data writes one "data: JSON" event.
func (e *sse) data(v any) {
	if e.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		e.err = err
		return
	}
	e.write(append(append([]byte("data: "), b...), '\n', '\n'))
}

// done writes the terminating "data: [DONE]" event.
func (e *sse) done() { e.write([]byte("data: [DONE]\n\n")) }

func (e *sse) write(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

// flush sends what was written to the client.
func (e *sse) flush() error {
	if e.err == nil {
		e.err = e.rc.Flush()
	}
	return e.err
}
