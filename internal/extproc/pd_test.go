package extproc

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

const pdConfig = `
pools:
  - name: pd
    instances:
      - {address: 10.0.1.1:8000, role: prefill}
      - {address: 10.0.1.2:8000, role: prefill}
      - {address: 10.0.2.1:8000, role: decode}
      - {address: 10.0.2.2:8000, role: both}
    pd: {min_uncached_tokens: 64}
routing:
  debug_headers: true
`

// A P/D pool's pin: the decode instance in the destination header, the
// prefill instance in x-prefiller-host-port when the decider sends it
// there, and never the client's own value of it.
func TestPDPin(t *testing.T) {
	ts := start(t, parseConfig(t, pdConfig), false)
	body := chat("m", "tell me about prefill and decode", false)
	decodes := []string{"10.0.2.1:8000", "10.0.2.2:8000"}
	prefills := []string{"10.0.1.1:8000", "10.0.1.2:8000", "10.0.2.2:8000"}

	c := ts.open(t)
	r := c.headers(t, false, ":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json",
		"x-prefiller-host-port", "6.6.6.6:80")
	if rm := r.GetRequestHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(); !slices.Contains(rm, "x-prefiller-host-port") {
		t.Errorf("headers phase removes %v, want the client's x-prefiller-host-port among them", rm)
	}
	r = c.body(t, body)
	m := r.GetRequestBody().GetResponse().GetHeaderMutation()
	dec, _, _ := strings.Cut(setHeader(m, "x-gateway-destination-endpoint"), ",") // primary,fallback
	pre := setHeader(m, "x-prefiller-host-port")
	if !slices.Contains(decodes, dec) || !slices.Contains(prefills, pre) || pre == dec {
		t.Fatalf("pin = %q, prefill %q; want a decode instance and another, prefill instance", dec, pre)
	}
	h := c.responseHeaders(t, "200").GetResponseHeaders().GetResponse().GetHeaderMutation()
	if got := setHeader(h, "x-dualmap-pd-reason"); got != "remote" {
		t.Errorf("x-dualmap-pd-reason = %q, want remote", got)
	}
	if got := setHeader(h, "x-dualmap-prefill-instance"); got != pre {
		t.Errorf("x-dualmap-prefill-instance = %q, want %q", got, pre)
	}
	c.close()

	// The same prompt again: its decode instance holds it, no prefill.
	c = ts.open(t)
	r = ts.post(t, c, "/v1/chat/completions", body)
	m = r.GetRequestBody().GetResponse().GetHeaderMutation()
	if got := setHeader(m, "x-prefiller-host-port"); got != "" || !slices.Contains(m.GetRemoveHeaders(), "x-prefiller-host-port") {
		t.Errorf("repeat: prefill %q, removes %v; want none set and the header removed", got, m.GetRemoveHeaders())
	}
	if got, _, _ := strings.Cut(setHeader(m, "x-gateway-destination-endpoint"), ","); got != dec {
		t.Errorf("repeat pinned %q, want %q (it holds the prompt)", got, dec)
	}
	c.close()

	// /debug/instances shows each half with the roles.
	rec := httptest.NewRecorder()
	ts.srv.AdminHandler(ts.reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/instances", nil))
	var out map[string][]struct{ ID, Role, Half string }
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range out["pd"] {
		got = append(got, e.Half+" "+e.ID+" "+e.Role)
	}
	slices.Sort(got)
	want := []string{"decode 10.0.2.1:8000 decode", "decode 10.0.2.2:8000 both",
		"prefill 10.0.1.1:8000 prefill", "prefill 10.0.1.2:8000 prefill", "prefill 10.0.2.2:8000 both"}
	if !slices.Equal(got, want) {
		t.Errorf("/debug/instances = %v, want %v", got, want)
	}
}

// Without P/D pools nothing about P/D is added to or removed from a pin.
func TestNoPDHeadersWithoutPDPools(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	c := ts.open(t)
	defer c.close()
	m := ts.post(t, c, "/v1/chat/completions", chat("m", "hello", false)).GetRequestBody().GetResponse().GetHeaderMutation()
	if len(m.GetRemoveHeaders()) != 0 || setHeader(m, "x-prefiller-host-port") != "" {
		t.Errorf("pin removes %v, sets prefill %q; want nothing of P/D", m.GetRemoveHeaders(), setHeader(m, "x-prefiller-host-port"))
	}
}
