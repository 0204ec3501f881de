package extproc

import "github.com/prometheus/client_golang/prometheus"

// Series of instances that left. Every series with an instance label is
// deleted once its instance is no member of its pool any more (config
// reload, DNS, xDS), so that membership churn does not grow /metrics for
// good. The gauges' refresh (updateGauges, on the ticker goroutine) notices
// the departures; an instance that comes back starts its series afresh.

// instanceVecs are the metric vectors labelled (pool, instance).
func (m *metrics) instanceVecs() []*prometheus.MetricVec {
	return []*prometheus.MetricVec{
		m.pending.MetricVec, m.healthy.MetricVec, m.upstreamErr.MetricVec,
		m.ttftEstimated.MetricVec, m.ttftObserved.MetricVec,
		m.queued.MetricVec, m.queuedTok.MetricVec, m.running.MetricVec,
		m.usage.reports.MetricVec, m.usage.reported.MetricVec, m.usage.predicted.MetricVec, m.usage.missed.MetricVec,
	}
}

// forgetGone deletes the series of the instances of pool that were
// members at the last call (seen) and are not now (ids), and returns the
// set to pass next time. Call it from one goroutine.
func (m *metrics) forgetGone(pool string, seen map[string]bool, ids []string) map[string]bool {
	now := make(map[string]bool, len(ids))
	for _, id := range ids {
		now[id] = true
	}
	for id := range seen {
		if now[id] {
			continue
		}
		for _, v := range m.instanceVecs() {
			v.DeleteLabelValues(pool, id)
		}
	}
	return now
}
