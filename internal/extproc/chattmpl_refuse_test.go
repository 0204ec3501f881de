package extproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A chat the model's template refuses (raise_exception) is answered 400
// with the template's message, and the stream goes on serving others.
func TestChatTemplateRefusalIs400(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strict.jinja")
	tmpl := `{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}<t>{{ m.content }}</t>{% endfor %}`
	if err := os.WriteFile(path, []byte(tmpl), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := start(t, parseConfig(t, `
pools:
  - chat_template: `+path+`
    instances: [{address: 10.0.0.1:8000}, {address: 10.0.0.2:8000}]
`), false)
	c := ts.open(t)
	r := ts.post(t, c, "/v1/chat/completions", chat("m", "hi", false)) // chat() starts with a system message
	c.close()
	wantStatus(t, r, 400, "tokenize")
	if msg, _ := errorBody(t, r.GetImmediateResponse())["message"].(string); !strings.Contains(msg, "System role not supported") {
		t.Errorf("error message = %q, want the template's", msg)
	}
	ok := ts.open(t)
	defer ok.close()
	r = ts.post(t, ok, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint") == "" {
		t.Errorf("a chat the template takes was not routed: %v", r)
	}
}
