package pool

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dualmap/dualmap/internal/xds"
)

const pdPool = `
pools:
  - name: pd
    instances:
      - {address: 10.0.1.1:8000, role: prefill}
      - {address: 10.0.1.2:8000, role: prefill}
      - {address: 10.0.2.1:8000, role: decode}
      - {address: 10.0.2.2:8000, role: decode}
    pd: {min_uncached_tokens: 64, decode_hit_ratio: 0.8}
`

var (
	prefillOnly = []string{"10.0.1.1:8000", "10.0.1.2:8000"}
	decodeIDs   = []string{"10.0.2.1:8000", "10.0.2.2:8000"}
)

// long is a prompt of many tokens under the byte approximation.
func long(seed string) string { return strings.Repeat(seed+" lorem ipsum dolor sit amet ", 40) }

// assertPDIdle fails unless neither half of p holds load and the in-flight
// gauges are back at zero.
func assertPDIdle(t *testing.T, m *testManager, p *Pool) {
	t.Helper()
	assertIdle(t, p)
	for _, st := range p.PrefillInstances() {
		if st.Running != 0 || st.PendingTokens != 0 || st.Queued != 0 {
			t.Errorf("prefill %s holds load: running %d, pending %d, queued %d", st.ID, st.Running, st.PendingTokens, st.Queued)
		}
	}
	for _, role := range []string{"prefill", "decode"} {
		if v := testutil.ToFloat64(m.pd.inflight.WithLabelValues(p.Name(), role)); v != 0 {
			t.Errorf("dualmap_pd_inflight{role=%s} = %v, want 0", role, v)
		}
	}
}

func decisions(m *testManager, pool, reason string) float64 {
	return testutil.ToFloat64(m.pd.decisions.WithLabelValues(pool, reason))
}

// The halves take only their roles' instances, and the decider sends a
// prompt to a prefill instance exactly when the decode instance misses
// enough of it: short prompts and prompts the decode instance holds are
// prefilled where they decode.
func TestPDDecider(t *testing.T) {
	m := startManager(t, parseConfig(t, pdPool), false, Options{})
	p := m.Pools()[0]
	if got := p.Addresses(); len(got) != 4 {
		t.Fatalf("Addresses() = %v, want the four instances (the prefill-only ones probed too)", got)
	}
	for _, id := range prefillOnly {
		if r := p.Role(id); r != "prefill" {
			t.Errorf("Role(%s) = %q, want prefill", id, r)
		}
	}
	ctx := context.Background()

	tk, err := p.Route(ctx, chat(t, "hi"), Controls{}, nopObserver{})
	if err != nil {
		t.Fatal(err)
	}
	if pre, why := tk.Prefill(); pre != "" || why != PDShort || !slices.Contains(decodeIDs, tk.Decision().Instance) {
		t.Errorf("short prompt: pinned %s, prefill %q (%s); want a decode instance, no prefill (short)", tk.Decision().Instance, pre, why)
	}
	tk.Done()

	body := chat(t, long("alpha"))
	tk, err = p.Route(ctx, body, Controls{}, nopObserver{})
	if err != nil {
		t.Fatal(err)
	}
	pre, why := tk.Prefill()
	if why != PDRemote || !slices.Contains(prefillOnly, pre) || !slices.Contains(decodeIDs, tk.Decision().Instance) {
		t.Fatalf("long prompt: pinned %s, prefill %q (%s); want a decode instance and a prefill instance (remote)", tk.Decision().Instance, pre, why)
	}
	if n := running(p); n != 1 {
		t.Errorf("decode running = %d, want 1", n)
	}
	onPrefill := 0
	for _, st := range p.PrefillInstances() {
		onPrefill += st.Running
	}
	if onPrefill != 1 {
		t.Errorf("prefill running = %d, want 1 (the remote prefill)", onPrefill)
	}
	tk.Responded(200, "", true)
	tk.FirstToken()
	for _, st := range p.PrefillInstances() {
		if st.Running != 0 {
			t.Errorf("prefill %s running %d after the first token, want 0: the prefill half ends there", st.ID, st.Running)
		}
	}
	first := tk.Decision().Instance
	tk.Done()

	// The same prompt again: the decode instance is predicted to hold it.
	tk, err = p.Route(ctx, body, Controls{}, nopObserver{})
	if err != nil {
		t.Fatal(err)
	}
	if pre, why := tk.Prefill(); pre != "" || why != PDCached || tk.Decision().Instance != first {
		t.Errorf("repeat: pinned %s, prefill %q (%s); want %s (the holder among equals), no prefill (decode_cached)", tk.Decision().Instance, pre, why, first)
	}
	tk.Done()
	for reason, want := range map[string]float64{PDShort: 1, PDRemote: 1, PDCached: 1, PDSame: 0, PDUnavailable: 0} {
		if got := decisions(m, "pd", reason); got != want {
			t.Errorf("dualmap_pd_decisions_total{reason=%s} = %v, want %v", reason, got, want)
		}
	}
	assertPDIdle(t, m, p)
}

// Both halves are released on every path, exactly once, and a 5xx of a
// request prefilled remotely takes out its prefill instance only.
func TestPDTicketReleasesBothHalves(t *testing.T) {
	tests := []struct {
		name string
		use  func(tk *Ticket)
		down string // "prefill", "decode" or ""
	}{
		{"success", func(tk *Ticket) { tk.Responded(200, "", true); tk.FirstToken() }, ""},
		{"done without a first token", func(tk *Ticket) { tk.Responded(200, "", true) }, ""},
		{"client gone before the response", func(*Ticket) {}, ""},
		{"prefill failed (sidecar 502)", func(tk *Ticket) { tk.Responded(502, "", true) }, "prefill"},
		{"4xx", func(tk *Ticket) { tk.Responded(400, "", true) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := startManager(t, parseConfig(t, pdPool), false, Options{})
			p := m.Pools()[0]
			tk, err := p.Route(context.Background(), chat(t, long(tt.name)), Controls{}, nopObserver{})
			if err != nil {
				t.Fatal(err)
			}
			pre, why := tk.Prefill()
			if why != PDRemote {
				t.Fatalf("decider = %s, want remote", why)
			}
			tt.use(tk)
			tk.Done()
			tk.Done()
			tk.FirstToken()
			assertPDIdle(t, m, p)
			for _, id := range p.Addresses() {
				want := (tt.down == "prefill" && id == pre) || (tt.down == "decode" && id == tk.Decision().Instance)
				if got := p.HealthOf(id).Down; got != want {
					t.Errorf("%s down = %v, want %v (prefill %s, decode %s)", id, got, want, pre, tk.Decision().Instance)
				}
			}
			if f := testutil.ToFloat64(m.pd.failures.WithLabelValues("pd")); (f == 1) != (tt.down == "prefill") {
				t.Errorf("dualmap_pd_prefill_failures_total = %v", f)
			}
		})
	}
}

// With every prefill instance out the decode instance prefills; with the
// failed one out the other takes the prefills.
func TestPDPrefillUnavailable(t *testing.T) {
	m := startManager(t, parseConfig(t, pdPool), false, Options{})
	p := m.Pools()[0]
	p.SetHealthy(prefillOnly[0], false)
	for i := range 4 {
		tk, err := p.Route(context.Background(), chat(t, long(string(rune('a'+i)))), Controls{}, nopObserver{})
		if err != nil {
			t.Fatal(err)
		}
		if pre, why := tk.Prefill(); why != PDRemote || pre != prefillOnly[1] {
			t.Errorf("one prefill instance out: prefill %q (%s), want %s (remote)", pre, why, prefillOnly[1])
		}
		tk.Done()
	}
	p.SetHealthy(prefillOnly[1], false)
	tk, err := p.Route(context.Background(), chat(t, long("z")), Controls{}, nopObserver{})
	if err != nil {
		t.Fatal(err)
	}
	if pre, why := tk.Prefill(); why != PDUnavailable || pre != "" {
		t.Errorf("no prefill instance: prefill %q (%s), want none (prefill_unavailable)", pre, why)
	}
	tk.Done()
	assertPDIdle(t, m, p)
}

// An instance of role both may prefill for itself: nothing is sent apart.
func TestPDSameInstance(t *testing.T) {
	m := startManager(t, parseConfig(t, `
pools:
  - name: pd
    instances: [{address: 10.0.0.1:8000, role: both}]
    pd: {min_uncached_tokens: 1}
`), false, Options{})
	p := m.Pools()[0]
	tk, err := p.Route(context.Background(), chat(t, long("same")), Controls{}, nopObserver{})
	if err != nil {
		t.Fatal(err)
	}
	if pre, why := tk.Prefill(); why != PDSame || pre != "" {
		t.Errorf("prefill %q (%s), want none (same_instance)", pre, why)
	}
	tk.Done()
	assertPDIdle(t, m, p)
}

// Roles from xDS metadata split the endpoints between the halves.
func TestPDRolesFromXDS(t *testing.T) {
	m := startManager(t, parseConfig(t, `
pools:
  - name: pd
    instances: [{address: 10.0.0.1:8000, role: decode}]
    xds: {address: 127.0.0.1:1, cluster: engines}
    pd: {}
`), false, Options{MembershipDelay: -1}) // every change at once
	p := m.Pools()[0]
	err := p.setXDS([]xds.Endpoint{
		{Address: "10.0.0.2:8000", Weight: 1, Role: "prefill"},
		{Address: "10.0.0.3:8000", Weight: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(sts []string) []string { slices.Sort(sts); return sts }
	var dec, pre []string
	for _, st := range p.Instances() {
		dec = append(dec, st.ID)
	}
	for _, st := range p.PrefillInstances() {
		pre = append(pre, st.ID)
	}
	if got, want := ids(dec), []string{"10.0.0.1:8000", "10.0.0.3:8000"}; !slices.Equal(got, want) {
		t.Errorf("decode half = %v, want %v", got, want)
	}
	if got, want := ids(pre), []string{"10.0.0.2:8000", "10.0.0.3:8000"}; !slices.Equal(got, want) {
		t.Errorf("prefill half = %v, want %v", got, want)
	}
	if r := p.Role("10.0.0.3:8000"); r != "both" {
		t.Errorf("Role(no metadata) = %q, want both", r)
	}
	if v := testutil.ToFloat64(m.pd.instances.WithLabelValues("pd", "prefill")); v != 1 {
		t.Errorf("dualmap_pd_instances{role=prefill} = %v, want 1", v)
	}
}

// The per-instance gauges cover the prefill-only instances: their health
// and the remote prefills they hold.
func TestPDGaugesCoverPrefillInstances(t *testing.T) {
	m := startManager(t, parseConfig(t, pdPool), false, Options{})
	p := m.Pools()[0]
	tk, err := p.Route(context.Background(), chat(t, long("gauge")), Controls{}, nopObserver{})
	if err != nil {
		t.Fatal(err)
	}
	pre, _ := tk.Prefill()
	p.SetHealthy(prefillOnly[0], false)
	m.UpdateGauges()
	if v := testutil.ToFloat64(m.m.running.WithLabelValues("pd", pre)); v != 1 {
		t.Errorf("dualmap_instance_running_requests{instance=%s} = %v, want 1 (the remote prefill)", pre, v)
	}
	if v := testutil.ToFloat64(m.m.healthy.WithLabelValues("pd", prefillOnly[0])); v != 0 {
		t.Errorf("dualmap_instance_healthy{instance=%s} = %v, want 0", prefillOnly[0], v)
	}
	if v := testutil.ToFloat64(m.m.healthy.WithLabelValues("pd", prefillOnly[1])); v != 1 {
		t.Errorf("dualmap_instance_healthy{instance=%s} = %v, want 1", prefillOnly[1], v)
	}
	tk.Done()
}
