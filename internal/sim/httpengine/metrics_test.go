package httpengine

import (
	"bytes"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestMetrics(t *testing.T) {
	opt := fast()
	opt.Model = "qwen-sim"
	_, url := start(t, opt)
	// 400 bytes: 100 tokens + 7 of role markers; then the same again.
	body := chatBody(string(bytes.Repeat([]byte("abcd"), 100)), `,"max_tokens":5`)
	for range 2 {
		if a := do(t, "POST", url+"/v1/chat/completions", body); a.status != http.StatusOK {
			t.Fatalf("POST = %d %s", a.status, a.body)
		}
	}
	a := do(t, "GET", url+"/metrics", "")
	if a.status != http.StatusOK {
		t.Fatalf("GET /metrics = %d, want 200", a.status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(a.body))
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v\n%s", err, a.body)
	}
	value := func(m *dto.Metric) float64 {
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
		return -1
	}
	tests := []struct {
		name string
		typ  dto.MetricType
		want float64 // the histogram's sample count
	}{
		{"vllm:num_requests_waiting", dto.MetricType_GAUGE, 0},
		{"vllm:num_requests_running", dto.MetricType_GAUGE, 0},
		{"vllm:prefix_cache_queries_total", dto.MetricType_COUNTER, 2 * 107},
		{"vllm:prefix_cache_hits_total", dto.MetricType_COUNTER, 106},
		{"vllm:prompt_tokens_total", dto.MetricType_COUNTER, 2 * 107},
		{"vllm:generation_tokens_total", dto.MetricType_COUNTER, 10},
		{"vllm:time_to_first_token_seconds", dto.MetricType_HISTOGRAM, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := fams[tt.name]
			if !ok {
				t.Fatalf("/metrics lacks %s", tt.name)
			}
			if f.GetType() != tt.typ || len(f.Metric) != 1 {
				t.Fatalf("%s: type %v with %d series, want %v with 1", tt.name, f.GetType(), len(f.Metric), tt.typ)
			}
			m := f.Metric[0]
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["model_name"] != "qwen-sim" || labels["engine_name"] != "test-engine" {
				t.Errorf("%s labels = %v, want model_name qwen-sim and engine_name test-engine", tt.name, labels)
			}
			if got := value(m); got != tt.want {
				t.Errorf("%s = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
	usage := fams["vllm:kv_cache_usage_perc"]
	if usage == nil || len(usage.Metric) != 1 {
		t.Fatalf("/metrics lacks vllm:kv_cache_usage_perc")
	}
	// The realistic engine model reports what vLLM does: blocks held by
	// running requests; once both finished, their cached blocks are free.
	if v := usage.Metric[0].Gauge.GetValue(); v != 0 {
		t.Errorf("vllm:kv_cache_usage_perc = %v, want 0 once both requests finished", v)
	}
}
