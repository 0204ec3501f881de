package extproc

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/attribute"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/pool"
	"github.com/dualmap/dualmap/scheduler"
)

// Prefill/decode pools (package pool, pd.go): the pin names the decode
// instance as for any pool, and a request the decider sends to a prefill
// instance also carries that instance in the pool's pd.header, which the
// decode side's P/D sidecar reads. A client's own value of any pool's
// pd.header never reaches a sidecar: it is removed with the destination
// header in the request headers phase, and again by the pin.

// pdHeaders are the pd.header names of cfg's pools, without repeats.
func pdHeaders(cfg config.Config) []string {
	var hs []string
	for _, p := range cfg.Pools {
		if p.PD != nil && !slices.Contains(hs, p.PD.Header) {
			hs = append(hs, p.PD.Header)
		}
	}
	return hs
}

// pinPD adds the P/D part of the pin to m: the prefill instance in its
// header, and the removal of every other P/D header.
func (st *stream) pinPD(m *extprocv3.HeaderMutation) {
	hs := st.s.pdHeaders
	if len(hs) == 0 {
		return
	}
	pre, name := "", ""
	if st.tk != nil {
		pre, _ = st.tk.Prefill()
		if d := st.tk.Pool().PD(); d != nil {
			name = d.Header
		}
	}
	if pre == "" {
		m.RemoveHeaders = append(m.RemoveHeaders, hs...)
		return
	}
	m.SetHeaders = append(m.SetHeaders, header(name, pre))
	for _, h := range hs {
		if h != name {
			m.RemoveHeaders = append(m.RemoveHeaders, h)
		}
	}
}

// pdDebugHeaders are the debug response headers of a P/D request.
func (st *stream) pdDebugHeaders() []*corev3.HeaderValueOption {
	pre, why := st.tk.Prefill()
	if why == "" {
		return nil
	}
	return []*corev3.HeaderValueOption{header("x-dualmap-prefill-instance", pre), header("x-dualmap-pd-reason", why)}
}

// tracePD puts the P/D decision on the request's span.
func (rc *recorder) tracePD(tk *pool.Ticket) {
	pre, why := tk.Prefill()
	if rc.tr == nil || why == "" {
		return
	}
	rc.tr.set(attribute.String("dualmap.pd.decode_instance", tk.Decision().Instance),
		attribute.String("dualmap.pd.prefill_instance", pre), attribute.String("dualmap.pd.reason", why))
}

// debugInstances is a pool's /debug/instances entry: the scheduler's view
// of each instance, and in a P/D pool each half's with the roles.
func debugInstances(p *pool.Pool) any {
	if p.PD() == nil {
		return p.Instances()
	}
	type entry struct {
		Role string // prefill, decode or both
		Half string // the scheduler reporting it: decode or prefill
		scheduler.InstanceState
	}
	var out []entry
	for _, st := range p.Instances() {
		out = append(out, entry{Role: p.Role(st.ID), Half: "decode", InstanceState: st})
	}
	for _, st := range p.PrefillInstances() {
		out = append(out, entry{Role: p.Role(st.ID), Half: "prefill", InstanceState: st})
	}
	return out
}
