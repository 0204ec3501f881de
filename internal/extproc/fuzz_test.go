package extproc

import (
	"context"
	"testing"
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
		r, err := st.prepare()
		if err != nil {
			if e := classify(err, 0); e.status == 500 {
				t.Fatalf("prepare(%q) = %v: a 500 for client input", body, err)
			}
			return
		}
		if r.Tokens < 0 || (r.Tokens > 0 && len(r.Blocks) == 0) {
			t.Fatalf("prepare() = %d tokens in %d blocks", r.Tokens, len(r.Blocks))
		}
		if _, err := st.pool.sched.EnqueueAndWait(context.Background(), r); err != nil {
			t.Fatalf("EnqueueAndWait() error = %v", err)
		}
		st.pool.sched.Complete(r)
	})
}
