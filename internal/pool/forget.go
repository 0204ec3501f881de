package pool

import "github.com/prometheus/client_golang/prometheus"

// Series of instances that left. Every series with an instance label is
// deleted once its instance is no member of its pool any more (config
// reload, DNS, xDS), so that membership churn does not grow /metrics for
// good. UpdateGauges notices the departures; an instance that comes back
// starts its series afresh. The pools' own series are deleted here; other
// packages' (the protocol's per-instance histograms and usage counters)
// through the functions given to OnGone.

// OnGone registers f, called from UpdateGauges with the pool and address
// of every instance that left its pool since the previous call. Register
// before Run.
func (m *Manager) OnGone(f func(pool, id string)) {
	m.gaugeMu.Lock()
	defer m.gaugeMu.Unlock()
	m.gone = append(m.gone, f)
}

// instanceVecs are the pools' metric vectors labelled (pool, instance).
func (m *metrics) instanceVecs() []*prometheus.MetricVec {
	return []*prometheus.MetricVec{
		m.pending.MetricVec, m.healthy.MetricVec, m.queued.MetricVec,
		m.queuedTok.MetricVec, m.running.MetricVec, m.aheadCost.MetricVec, m.engineFull.MetricVec,
		m.upstreamErr.MetricVec,
	}
}

// forgetGone deletes the series of the instances of pool that were
// members at the last call (seen) and are not now (ids), and returns the
// set to pass next time. The caller holds m.gaugeMu.
func (m *Manager) forgetGone(pool string, seen map[string]bool, ids []string) map[string]bool {
	now := make(map[string]bool, len(ids))
	for _, id := range ids {
		now[id] = true
	}
	for id := range seen {
		if now[id] {
			continue
		}
		for _, v := range m.m.instanceVecs() {
			v.DeleteLabelValues(pool, id)
		}
		for _, f := range m.gone {
			f(pool, id)
		}
	}
	return now
}
