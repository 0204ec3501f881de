package extproc

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// pinOf returns the value and append action of the mutation's header key,
// and how many times the mutation sets it.
func pinOf(m *extprocv3.HeaderMutation, key string) (string, corev3.HeaderValueOption_HeaderAppendAction, int) {
	var v string
	var a corev3.HeaderValueOption_HeaderAppendAction
	n := 0
	for _, h := range m.GetSetHeaders() {
		if h.GetHeader().GetKey() == key {
			v, a = string(h.GetHeader().GetRawValue()), h.GetAppendAction()
			n++
		}
	}
	return v, a, n
}

// A destination header sent by the client never reaches Envoy's routing:
// on every path the headers phase removes it and the pin overwrites it
// (an appended pin would leave the client's value first), under the
// header name configured in routing.header, not a hard-wired default.
func TestClientDestinationNeverSurvives(t *testing.T) {
	const forged = "6.6.6.6:80"
	configs := []struct {
		name, header, yaml string
	}{
		{"default header", "x-gateway-destination-endpoint", fourInstances},
		{"configured header", "x-my-upstream", strings.Replace(fourInstances, "routing:\n", "routing:\n  header: x-my-upstream\n", 1)},
	}
	paths := []struct {
		name, method, path, body string
	}{
		{"chat", "POST", "/v1/chat/completions", chat("m", "hello", false)},
		{"completions", "POST", "/v1/completions", `{"model":"m","prompt":"Once upon a time"}`},
		{"responses", "POST", "/v1/responses", `{"model":"m","input":"Tell me a story"}`},
		{"embeddings (not parsed)", "POST", "/v1/embeddings", `{"model":"m","input":"x"}`},
		{"unknown POST", "POST", "/admin/anything", `{}`},
		{"GET without body", "GET", "/v1/models", ""},
	}
	for _, cfg := range configs {
		ts := start(t, parseConfig(t, cfg.yaml), false)
		other := "x-gateway-destination-endpoint"
		if cfg.header == other {
			other = "x-my-upstream"
		}
		for _, p := range paths {
			t.Run(cfg.name+"/"+p.name, func(t *testing.T) {
				c := ts.open(t)
				defer c.close()
				eos := p.body == ""
				hr := c.headers(t, eos, ":method", p.method, ":path", p.path, "content-type", "application/json",
					cfg.header, forged, other, "10.0.0.9:1")
				hm := hr.GetRequestHeaders().GetResponse().GetHeaderMutation()
				if hr.GetRequestHeaders() == nil {
					t.Fatalf("headers phase answered %T, want RequestHeaders", hr.Response)
				}
				pinned := hm // the phase that pins: headers for a bodiless request, else the body
				if !eos {
					if removed := hm.GetRemoveHeaders(); len(removed) != 1 || removed[0] != cfg.header {
						t.Errorf("headers phase removes %v, want [%s]", removed, cfg.header)
					}
					if _, _, n := pinOf(hm, cfg.header); n != 0 {
						t.Errorf("headers phase sets %s before the body is seen", cfg.header)
					}
					br := c.body(t, p.body)
					if br.GetRequestBody() == nil {
						t.Fatalf("body phase answered %T, want RequestBody", br.Response)
					}
					pinned = br.GetRequestBody().GetResponse().GetHeaderMutation()
				}
				v, action, n := pinOf(pinned, cfg.header)
				if n != 1 || !strings.HasPrefix(v, "10.0.0.") || strings.Contains(v, forged) {
					t.Errorf("pin %s = %q (set %d times), want one instance list", cfg.header, v, n)
				}
				if n == 1 && action != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
					t.Errorf("pin %s append action = %v, want OVERWRITE_IF_EXISTS_OR_ADD", cfg.header, action)
				}
				if _, _, n := pinOf(pinned, other); n != 0 {
					t.Errorf("pin also sets %s, which routing.header does not name", other)
				}
			})
		}
	}
}
