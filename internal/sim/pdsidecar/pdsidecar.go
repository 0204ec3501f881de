// Package pdsidecar is a stand-in for the decode-side routing sidecar of a
// prefill/decode deployment (llm-d's cmd/pd-sidecar speaks the same
// protocol): it listens in front of one decode engine and, when a request
// names a prefill instance in its header (x-prefiller-host-port), runs the
// request in two legs, the way vLLM's NIXL connector is driven:
//
//  1. The prefill leg goes to the named instance: the client's body with
//     kv_transfer_params {do_remote_decode: true, do_remote_prefill: false,
//     the remote fields null}, stream false, stream_options removed and
//     max_tokens, max_completion_tokens and min_tokens 1.
//  2. The decode leg goes to the local engine: the client's body as it came
//     (stream and token limits restored) with the kv_transfer_params the
//     prefill answered; its answer, streamed or not, goes to the client as
//     the engine writes it.
//
// A request without the header, and every other path (/health, /metrics,
// /v1/models), goes straight to the local engine. The header is removed
// before anything is sent on.
//
// Failures answer as llm-d's sidecar does: a prefill instance that cannot
// be reached is 502; a prefill answer that is not 2xx goes back to the
// client as it came (status, headers, body); a request body, or a prefill
// answer, that is not a JSON object is 400; a local engine that refuses
// connections is 503 and any other failure to reach it 502. The answers
// this package writes itself are vLLM's error object (object "error",
// message, type, code). Unlike llm-d's, bodies are bounded (MaxBodyBytes:
// 413 for a request, 502 for a prefill answer).
//
// As llm-d's, the decode answer's usage reports the prefill instance's
// cached tokens (usage.go).
//
// It is a test part: it sends a prompt to whatever host:port the header
// names (llm-d's checks the target against its InferencePool with
// --enable-ssrf-protection), so only the router, which removes a client's
// own value of the header, may reach it.
//
// The files: pdsidecar.go (Server, the two legs, failures), usage.go (the
// decode answer's cached tokens).
package pdsidecar

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults for the zero fields of Options.
const (
	DefaultHeader         = "x-prefiller-host-port"
	DefaultMaxBodyBytes   = 32 << 20
	DefaultPrefillTimeout = 10 * time.Minute
)

// RequestIDHeader carries one id on both legs of a request (vLLM's
// x-request-id), so that their logs can be joined.
const RequestIDHeader = "x-request-id"

// Options configure a Server. Zero fields take the defaults above.
type Options struct {
	// Decode is the local decode engine, host:port (required).
	Decode string
	// Header names the prefill instance; "host:port", or a comma-separated
	// list of which the first is used.
	Header string
	// MaxBodyBytes bounds a request body with a prefill instance named and
	// a prefill answer.
	MaxBodyBytes int64
	// PrefillTimeout bounds the prefill leg.
	PrefillTimeout time.Duration
	// Transport carries both legs (nil: a clone of
	// http.DefaultTransport).
	Transport http.RoundTripper
}

// Server is the sidecar's HTTP handler. It is safe for concurrent use.
type Server struct {
	opt     Options
	decode  *httputil.ReverseProxy
	prefill *http.Client
}

// New returns a server for opt, or an error naming what is invalid.
func New(opt Options) (*Server, error) {
	if opt.Header == "" {
		opt.Header = DefaultHeader
	}
	if opt.MaxBodyBytes == 0 {
		opt.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opt.PrefillTimeout == 0 {
		opt.PrefillTimeout = DefaultPrefillTimeout
	}
	if opt.Transport == nil {
		opt.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	var errs []error
	if _, _, err := net.SplitHostPort(opt.Decode); err != nil {
		errs = append(errs, fmt.Errorf("pdsidecar: the decode engine must be host:port, got %q", opt.Decode))
	}
	if opt.MaxBodyBytes < 0 || opt.PrefillTimeout < 0 {
		errs = append(errs, fmt.Errorf("pdsidecar: MaxBodyBytes and PrefillTimeout must be >= 0"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	target := &url.URL{Scheme: "http", Host: opt.Decode}
	s := &Server{opt: opt, prefill: &http.Client{Transport: opt.Transport, Timeout: opt.PrefillTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	s.decode = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
		},
		Transport:     opt.Transport,
		FlushInterval: -1, // a stream's chunks as they come
		ErrorHandler:  decodeFailed,
	}
	return s, nil
}

// ServeHTTP runs one request: in two legs when it names a prefill
// instance and is an inference request, else straight to the engine.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	pre := prefillTarget(r.Header, s.opt.Header)
	if pre == "" || r.Method != http.MethodPost || !inferencePath(r.URL.Path) {
		s.decode.ServeHTTP(w, r)
		return
	}
	s.twoLegs(w, r, pre)
}

// prefillTarget returns the prefill instance h names in header name (the
// first of a list), and removes the header.
func prefillTarget(h http.Header, name string) string {
	vs := h.Values(name)
	h.Del(name)
	if len(vs) == 0 {
		return ""
	}
	first, _, _ := strings.Cut(vs[0], ",")
	return strings.TrimSpace(first)
}

// inferencePath reports whether path is one the sidecar runs in two legs.
func inferencePath(path string) bool {
	return path == "/v1/chat/completions" || path == "/v1/completions"
}

// Fields of the request body the legs change.
const (
	fieldKV            = "kv_transfer_params"
	fieldStream        = "stream"
	fieldStreamOptions = "stream_options"
)

// tokenLimits are the request fields the prefill leg sets to 1.
var tokenLimits = []string{"max_tokens", "max_completion_tokens", "min_tokens"}

// prefillKV is the prefill leg's kv_transfer_params.
var prefillKV = json.RawMessage(`{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`)

func (s *Server) twoLegs(w http.ResponseWriter, r *http.Request, pre string) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, s.opt.MaxBodyBytes+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", "reading the request body: "+err.Error())
		return
	}
	if int64(len(raw)) > s.opt.MaxBodyBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "BadRequestError", fmt.Sprintf("request body over %d bytes", s.opt.MaxBodyBytes))
		return
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil || body == nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("invalid JSON: the request body must be a JSON object (%v)", err))
		return
	}
	id := requestID()

	// The prefill leg.
	client := map[string]json.RawMessage{}
	for _, f := range append([]string{fieldStream, fieldStreamOptions}, tokenLimits...) {
		if v, ok := body[f]; ok {
			client[f] = v
		}
	}
	body[fieldKV] = prefillKV
	body[fieldStream] = json.RawMessage("false")
	delete(body, fieldStreamOptions)
	for _, f := range tokenLimits {
		body[f] = json.RawMessage("1")
	}
	status, header, answer, err := s.prefillLeg(r, pre, id, body)
	if err != nil {
		writeError(w, http.StatusBadGateway, "BadGateway", err.Error())
		return
	}
	if status < 200 || status > 299 {
		copyHeader(w.Header(), header)
		w.Header().Del("Content-Length")
		w.WriteHeader(status)
		w.Write(answer)
		return
	}
	var ans map[string]json.RawMessage
	if err := json.Unmarshal(answer, &ans); err != nil || ans == nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("invalid JSON: the prefill answer from %s is not a JSON object (%v)", pre, err))
		return
	}

	// The decode leg.
	delete(body, fieldStream)
	for _, f := range tokenLimits {
		delete(body, f)
	}
	for f, v := range client {
		body[f] = v
	}
	kv, ok := ans[fieldKV]
	if !ok {
		kv = json.RawMessage("null") // decoded without: the engine prefills
	}
	body[fieldKV] = kv
	dbody, err := json.Marshal(body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalServerError", err.Error())
		return
	}
	dreq := r.Clone(r.Context())
	dreq.Body = io.NopCloser(bytes.NewReader(dbody))
	dreq.ContentLength = int64(len(dbody))
	dreq.Header.Del("Content-Length")
	dreq.Header.Set(RequestIDHeader, id)
	uw := &usageWriter{w: w, cached: cachedOf(ans), max: int(s.opt.MaxBodyBytes)}
	s.decode.ServeHTTP(uw, dreq)
	uw.finish()
}

// prefillLeg sends body to pre and returns its answer; an error is a
// prefill instance not reached or an answer over MaxBodyBytes.
func (s *Server) prefillLeg(r *http.Request, pre, id string, body map[string]json.RawMessage) (int, http.Header, []byte, error) {
	pbody, err := json.Marshal(body)
	if err != nil {
		return 0, nil, nil, err
	}
	host := strings.TrimPrefix(pre, "http://")
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://"+host+r.URL.RequestURI(), bytes.NewReader(pbody))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("prefill instance %q: %v", pre, err)
	}
	copyHeader(req.Header, r.Header)
	removeHopHeaders(req.Header)
	req.Header.Del("Content-Length")
	req.Header.Set(RequestIDHeader, id)
	resp, err := s.prefill.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("prefill instance %s: %v", pre, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, s.opt.MaxBodyBytes+1))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("prefill instance %s: reading the answer: %v", pre, err)
	}
	if int64(len(b)) > s.opt.MaxBodyBytes {
		return 0, nil, nil, fmt.Errorf("prefill instance %s: answer over %d bytes", pre, s.opt.MaxBodyBytes)
	}
	removeHopHeaders(resp.Header)
	return resp.StatusCode, resp.Header, b, nil
}

// decodeFailed answers a decode leg that could not reach the engine.
func decodeFailed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client went away
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "the decode engine is not ready: "+err.Error())
		return
	}
	writeError(w, http.StatusBadGateway, "BadGateway", "the decode engine: "+err.Error())
}

// vllmError is vLLM's error object.
type vllmError struct {
	Object  string `json:"object"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    int    `json:"code"`
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(vllmError{Object: "error", Message: msg, Type: typ, Code: status})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}

// hopHeaders are the hop-by-hop headers (RFC 9110 7.6.1) a proxy does not
// pass on.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// requestID returns a random id for both legs of a request.
func requestID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "pd-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return hex.EncodeToString(b[:])
}

// Serve serves s on l until ctx ends, then lets requests in flight finish
// for at most grace. ready, if not nil, gets the bound address first.
func Serve(ctx context.Context, l net.Listener, s *Server, grace time.Duration, ready func(addr string)) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 1 << 20}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	if ready != nil {
		ready(l.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("pdsidecar: serve: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hs.Shutdown(shut); err != nil {
		hs.Close()
	}
	<-errc
	return nil
}
