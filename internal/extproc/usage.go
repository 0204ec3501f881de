package extproc

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Engine-reported prompt reuse. Engines say in each response how many prompt
// tokens they took from their prefix cache: usage.prompt_tokens_details.
// cached_tokens (the OpenAI field; vLLM and llama.cpp fill it) and, from
// llama.cpp, timings.cache_n. The router reads it from the response body as
// Envoy streams it past (routing.response_body: streamed) and compares it,
// per instance, with the reuse it predicted when it routed the request: the
// series below are that comparison. The body is not kept: a fixed-size state
// machine looks for the two keys across chunk boundaries.

// usageKeys are the JSON keys read, in order of preference.
var usageKeys = [2]string{`"cached_tokens":`, `"cache_n":`}

// maxUsageDigits bounds a reported count; longer numbers are ignored.
const maxUsageDigits = 9

// usageScan finds the last value of each of usageKeys in a byte stream.
type usageScan struct {
	instance string // who served: set when a 2xx response starts, else ""
	matched  [len(usageKeys)]uint8
	reading  int8 // index into usageKeys whose number is being read, or -1
	started  bool // reading: a digit was seen
	num      int
	digits   int
	found    [len(usageKeys)]bool
	value    [len(usageKeys)]int
}

// start arms the scan for a successful response served by instance.
func (u *usageScan) start(instance string) {
	*u = usageScan{instance: instance, reading: -1}
}

// feed scans one body chunk. It never allocates and keeps no bytes.
func (u *usageScan) feed(b []byte) {
	if u.instance == "" {
		return
	}
	for _, c := range b {
		if u.reading >= 0 {
			switch {
			case c >= '0' && c <= '9':
				u.started = true
				u.num = u.num*10 + int(c-'0')
				u.digits++
				if u.digits > maxUsageDigits {
					u.reading = -1 // absurd: ignored
				}
				continue
			case !u.started && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
				continue
			}
			if u.started {
				u.found[u.reading], u.value[u.reading] = true, u.num
			}
			u.reading = -1
		}
		for k, key := range usageKeys {
			m := u.matched[k]
			if key[m] != c {
				m = 0 // the keys start with '"' and hold no other: a restart can only be here
			}
			if key[m] == c {
				m++
			}
			if int(m) == len(key) {
				m = 0
				u.reading, u.started, u.num, u.digits = int8(k), false, 0, 0
			}
			u.matched[k] = m
		}
	}
}

// cached returns the engine-reported cached prompt tokens, and whether the
// response reported any.
func (u *usageScan) cached() (int, bool) {
	for k := range usageKeys {
		if u.found[k] {
			return u.value[k], true
		}
	}
	return 0, false
}

// usageMetrics compare predicted with engine-reported prefix reuse.
type usageMetrics struct {
	reports   *prometheus.CounterVec // pool, instance
	reported  *prometheus.CounterVec // pool, instance
	predicted *prometheus.CounterVec // pool, instance
	missed    *prometheus.CounterVec // pool, instance
	over      *prometheus.CounterVec // pool, instance
	overTok   *prometheus.CounterVec // pool, instance
}

func newUsageMetrics(reg prometheus.Registerer) *usageMetrics {
	labels := []string{"pool", "instance"}
	m := &usageMetrics{
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_engine_usage_reports_total",
			Help: "Responses whose body reported the engine's cached prompt tokens (usage.prompt_tokens_details.cached_tokens or llama.cpp's timings.cache_n), by the instance that served.",
		}, labels),
		reported: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_engine_cached_tokens_total",
			Help: "Prompt tokens the engine reported as taken from its prefix cache, over the responses counted by dualmap_engine_usage_reports_total.",
		}, labels),
		predicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_predicted_cached_tokens_total",
			Help: "Prompt tokens the router predicted cached on the instance when it routed, over the same responses (0 for a response served by the fallback). Compare with dualmap_engine_cached_tokens_total; the router counts tokens with its pool's tokenizer, the engine with its own.",
		}, labels),
		missed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_predicted_cache_misses_total",
			Help: "Responses for which the router predicted a cached prefix and the engine reported none: the engine had evicted it, or never held it.",
		}, labels),
		over: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_predicted_cache_overclaims_total",
			Help: "Responses for which the router predicted more cached prompt tokens than the engine reported: the engine had evicted part or all of the prefix, or never held it.",
		}, labels),
		overTok: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_predicted_cache_overclaimed_tokens_total",
			Help: "Over the responses counted by dualmap_predicted_cache_overclaims_total, the predicted cached tokens beyond those the engine reported.",
		}, labels),
	}
	if reg != nil {
		reg.MustRegister(m.reports, m.reported, m.predicted, m.missed, m.over, m.overTok)
	}
	return m
}

// observe records one response's reported reuse against the prediction.
func (m *usageMetrics) observe(pool, instance string, predicted, reported int) {
	m.reports.WithLabelValues(pool, instance).Inc()
	m.reported.WithLabelValues(pool, instance).Add(float64(reported))
	m.predicted.WithLabelValues(pool, instance).Add(float64(predicted))
	if predicted > 0 && reported == 0 {
		m.missed.WithLabelValues(pool, instance).Inc()
	}
	if predicted > reported {
		m.over.WithLabelValues(pool, instance).Inc()
		m.overTok.WithLabelValues(pool, instance).Add(float64(predicted - reported))
	}
}

// usageEnded is called once when a response body ends: it records what the
// engine reported, if anything.
func (st *stream) usageEnded() {
	u := &st.usage
	if u.instance == "" {
		return
	}
	reported, ok := u.cached()
	instance := u.instance
	u.instance = ""
	if !ok {
		return
	}
	predicted := 0
	if dec := st.tk.Decision(); instance == dec.Instance {
		predicted = dec.CachedTokens
	}
	st.rec.usage(st.pool, instance, predicted, reported)
}
