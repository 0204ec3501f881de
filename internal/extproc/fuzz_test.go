package extproc

import (
	"context"
	"testing"

	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/pool"
	"github.com/dualmap/dualmap/scheduler"
)

// FuzzBody drives the body phase's work (parse, tokenize, hash, route,
// release) with arbitrary bodies and paths: it must never panic, and every
// failure must map to a client error, never to a 500.
func FuzzBody(f *testing.F) {
	for _, seed := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}],"tools":[{"type":"function"}]}`},
		{"/v1/completions", `{"model":"m","prompt":[1,2,3]}`},
		{"/v1/responses", `{"model":"m","input":[{"type":"function_call","name":"f"}],"instructions":"x"}`},
		{"/v1/chat/completions", `{"model":`},
		{"/v1/chat/completions", "\xff"},
	} {
		f.Add(seed.path, []byte(seed.body))
	}
	srv, err := New(parseConfig(f, fourInstances), Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		st := newStream(srv, context.Background())
		st.method, st.path, st.contentType, st.body = "POST", path, "application/json", body
		tk, err := routeBody(st, body)
		if err != nil {
			if e := classify(err, 0); e.status == 500 {
				t.Fatalf("routeBody(%q) = %v: a 500 for client input", body, err)
			}
			return
		}
		r := tk.Request()
		if r.Tokens < 0 || (r.Tokens > 0 && len(r.Blocks) == 0) {
			t.Fatalf("routeBody() = %d tokens in %d blocks", r.Tokens, len(r.Blocks))
		}
		tk.Done()
	})
}

// routeBody parses st's request with body and routes it through its
// model's pool with no controls, as the body phase does without the
// protocol around it.
func routeBody(st *stream, body []byte) (*pool.Ticket, error) {
	b, err := openai.Parse(st.method, st.path, st.contentType, body, openai.Limits{MaxBodyBytes: st.s.cfg.Limits.MaxBodyBytes})
	if err != nil {
		return nil, err
	}
	p, err := st.s.pools.ForModel(b.Model)
	if err != nil {
		return nil, err
	}
	return p.Route(context.Background(), b, pool.Controls{}, nopObserver{})
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) Tokenized(*scheduler.Request, error) {}
