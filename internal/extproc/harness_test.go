package extproc

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dualmap/dualmap/internal/config"
)

// testServer is a real gRPC server on loopback with the ext_proc service.
type testServer struct {
	srv    *Server
	client extprocv3.ExternalProcessorClient
	reg    *prometheus.Registry
}

func parseConfig(t testing.TB, y string) config.Config {
	t.Helper()
	c, err := config.Parse([]byte(y), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const fourInstances = `
pools:
  - instances:
      - address: 10.0.0.1:8000
      - address: 10.0.0.2:8000
      - address: 10.0.0.3:8000
      - address: 10.0.0.4:8000
routing:
  debug_headers: true
  session_header: x-session-id
slo:
  classes: {interactive: 1s}
limits:
  max_body_bytes: 65536
`

// start serves cfg; run starts the background work (ticks, health checks).
func start(t testing.TB, cfg config.Config, run bool) *testServer {
	t.Helper()
	return startWith(t, cfg, run, Options{})
}

// startWith is start with opt (its Registry is the test's; its
// TickInterval, when zero, 10 ms).
func startWith(t testing.TB, cfg config.Config, run bool, opt Options) *testServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	opt.Registry = reg
	if opt.TickInterval == 0 {
		opt.TickInterval = 10 * time.Millisecond
	}
	srv, err := New(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.MaxRecvMsgSize(8 << 20))
	srv.Register(g)
	go g.Serve(lis)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if run {
		go func() { srv.Run(ctx); close(done) }()
	} else {
		close(done)
	}
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(8<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		<-done
		g.Stop()
		srv.Close()
	})
	return &testServer{srv: srv, client: extprocv3.NewExternalProcessorClient(conn), reg: reg}
}

// call is one HTTP request through the ext_proc stream, as Envoy sends it.
type call struct {
	stream extprocv3.ExternalProcessor_ProcessClient
	cancel context.CancelFunc
}

func (ts *testServer) open(t testing.TB) *call {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	s, err := ts.client.Process(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return &call{stream: s, cancel: cancel}
}

func hdrs(kv ...string) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return m
}

func (c *call) send(t testing.TB, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	t.Helper()
	if err := c.stream.Send(req); err != nil {
		t.Fatalf("Send() error = %v", err)
	}
	resp, err := c.stream.Recv()
	if err != nil {
		t.Fatalf("Recv() error = %v", err)
	}
	return resp
}

func (c *call) headers(t testing.TB, eos bool, kv ...string) *extprocv3.ProcessingResponse {
	return c.send(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: hdrs(kv...), EndOfStream: eos}}})
}

func (c *call) body(t testing.TB, b string) *extprocv3.ProcessingResponse {
	return c.send(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: true}}})
}

func (c *call) responseHeaders(t testing.TB, status string) *extprocv3.ProcessingResponse {
	return c.send(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: hdrs(":status", status)}}})
}

func (c *call) close() {
	c.stream.CloseSend()
	c.stream.Recv() // wait for the server to end the stream
	c.cancel()
}

// post sends a POST request with body and returns the answer to the body, or
// the immediate response that refused its headers.
func (ts *testServer) post(t testing.TB, c *call, path, body string, extra ...string) *extprocv3.ProcessingResponse {
	t.Helper()
	kv := append([]string{":method", "POST", ":path", path, "content-type", "application/json"}, extra...)
	r := c.headers(t, false, kv...)
	switch {
	case r.GetImmediateResponse() != nil:
		return r // refused in the headers phase (a bad control header)
	case r.GetRequestHeaders() == nil:
		t.Fatalf("headers phase answered %T, want RequestHeaders", r.Response)
	}
	return c.body(t, body)
}

// setHeader returns the value a mutation sets for key, or "".
func setHeader(m *extprocv3.HeaderMutation, key string) string {
	for _, h := range m.GetSetHeaders() {
		if h.Header.Key == key {
			return string(h.Header.RawValue)
		}
	}
	return ""
}

func chat(model, user string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model":  model,
		"stream": stream,
		"messages": []map[string]any{
			{"role": "system", "content": strings.Repeat("You are a helpful assistant. ", 40)},
			{"role": "user", "content": user},
		},
	})
	return string(b)
}

// errorBody decodes an immediate response's OpenAI error.
func errorBody(t testing.TB, r *extprocv3.ImmediateResponse) map[string]any {
	t.Helper()
	var v map[string]map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("error body %q is not JSON: %v", r.Body, err)
	}
	return v["error"]
}
