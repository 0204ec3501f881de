package pdsidecar

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// The decode leg's answer reports, in usage.prompt_tokens_details.
// cached_tokens, the prompt tokens the prefill instance found in its
// prefix cache (as llm-d's sidecar does): the decode engine counts all the
// KV it received as cached, which says nothing of where the prompt was
// computed. A whole answer is rewritten once complete, a stream one
// "data:" line at a time; an answer or line over MaxBodyBytes, or one that
// is not JSON, passes unchanged.

// cachedOf returns the cached_tokens of a prefill answer's usage (0 when
// it has none, as vLLM leaves prompt_tokens_details null for no hit).
func cachedOf(ans map[string]json.RawMessage) int {
	var u struct {
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	if json.Unmarshal(ans["usage"], &u) != nil || u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

// withCached returns the JSON object b with its usage's cached tokens set
// to n, or b itself when it is not an object with a usage object.
func withCached(b []byte, n int) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil || obj == nil {
		return b
	}
	var usage map[string]json.RawMessage
	if json.Unmarshal(obj["usage"], &usage) != nil || usage == nil {
		return b
	}
	var details map[string]json.RawMessage
	if json.Unmarshal(usage["prompt_tokens_details"], &details) != nil || details == nil {
		details = map[string]json.RawMessage{}
	}
	details["cached_tokens"] = json.RawMessage(strconv.Itoa(n))
	var err error
	if usage["prompt_tokens_details"], err = json.Marshal(details); err != nil {
		return b
	}
	if obj["usage"], err = json.Marshal(usage); err != nil {
		return b
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return b
	}
	return out
}

// usageWriter is the decode leg's writer: it passes the answer on with
// its usage rewritten. finish must be called once the answer is written.
type usageWriter struct {
	w       http.ResponseWriter
	cached  int
	max     int
	wrote   bool // headers sent
	rewrite bool // a 2xx answer
	sse     bool
	pass    bool   // over max: what is left passes unchanged
	buf     []byte // the whole answer, or a stream's incomplete line
	err     error  // the first write error
}

func (u *usageWriter) Header() http.Header { return u.w.Header() }

func (u *usageWriter) WriteHeader(code int) {
	if u.wrote {
		return
	}
	u.wrote = true
	u.rewrite = code >= 200 && code <= 299
	u.sse = strings.HasPrefix(u.w.Header().Get("Content-Type"), "text/event-stream")
	if u.rewrite {
		u.w.Header().Del("Content-Length") // the length changes
	}
	u.w.WriteHeader(code)
}

func (u *usageWriter) Write(b []byte) (int, error) {
	if !u.wrote {
		u.WriteHeader(http.StatusOK)
	}
	if u.err != nil {
		return 0, u.err
	}
	if !u.rewrite || u.pass {
		return u.out(b, len(b))
	}
	u.buf = append(u.buf, b...)
	if u.sse {
		for {
			i := bytes.IndexByte(u.buf, '\n')
			if i < 0 {
				break
			}
			u.out(u.line(u.buf[:i+1]), 0)
			u.buf = u.buf[i+1:]
		}
	}
	if len(u.buf) > u.max {
		u.pass = true
		u.out(u.buf, 0)
		u.buf = nil
	}
	return len(b), u.err
}

// line returns a stream's line with its usage rewritten.
func (u *usageWriter) line(l []byte) []byte {
	data, ok := bytes.CutPrefix(l, []byte("data: "))
	if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
		return l
	}
	body := bytes.TrimRight(data, "\r\n")
	return append(append([]byte("data: "), withCached(body, u.cached)...), data[len(body):]...)
}

// out writes b, and returns n and the first error.
func (u *usageWriter) out(b []byte, n int) (int, error) {
	if u.err == nil {
		_, u.err = u.w.Write(b)
	}
	return n, u.err
}

// Flush sends what is complete: a stream's whole lines.
func (u *usageWriter) Flush() {
	if !u.wrote || u.rewrite && !u.sse && !u.pass {
		return // a whole answer goes at finish
	}
	if f, ok := u.w.(http.Flusher); ok && u.err == nil {
		f.Flush()
	}
}

// finish writes what is held back.
func (u *usageWriter) finish() {
	if len(u.buf) == 0 {
		return
	}
	if u.sse {
		u.out(u.line(u.buf), 0)
	} else {
		u.out(withCached(u.buf, u.cached), 0)
	}
	u.buf = nil
}
