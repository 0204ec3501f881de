package replay

import (
	"encoding/json"
	"strconv"
)

// JSON forms: snake_case keys, durations in seconds (keys ending in _s),
// as in the reports of package sim.

// MarshalJSON encodes p as {"p50_s":..., "p90_s":..., "p99_s":...}.
func (p Percentiles) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		P50 float64 `json:"p50_s"`
		P90 float64 `json:"p90_s"`
		P99 float64 `json:"p99_s"`
	}{p.P50.Seconds(), p.P90.Seconds(), p.P99.Seconds()})
}

// MarshalJSON encodes s with snake_case keys and durations in seconds.
func (s InstanceSummary) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Requests int     `json:"requests"`
		OK       int     `json:"ok"`
		Failed   int     `json:"failed"`
		HitRate  float64 `json:"hit_rate"`
		TTFTP50  float64 `json:"ttft_p50_s"`
	}{s.Requests, s.OK, s.Failed, s.HitRate, s.TTFTP50.Seconds()})
}

// MarshalJSON encodes s with snake_case keys and durations in seconds;
// by_status is keyed by the status code as a string ("0": no response).
func (s Summary) MarshalJSON() ([]byte, error) {
	byStatus := make(map[string]int, len(s.ByStatus))
	for code, n := range s.ByStatus {
		byStatus[strconv.Itoa(code)] = n
	}
	per := s.PerInstance
	if per == nil {
		per = map[string]InstanceSummary{}
	}
	return json.Marshal(struct {
		Requests      int                        `json:"requests"`
		OK            int                        `json:"ok"`
		Failed        int                        `json:"failed"`
		Delayed       int                        `json:"delayed"`
		Duration      float64                    `json:"duration_s"`
		TargetQPS     float64                    `json:"target_qps"`
		AchievedQPS   float64                    `json:"achieved_qps"`
		TTFT          Percentiles                `json:"ttft"`
		E2E           Percentiles                `json:"e2e"`
		HitRate       float64                    `json:"hit_rate"`
		UsageReported int                        `json:"usage_reported"`
		PerInstance   map[string]InstanceSummary `json:"per_instance"`
		ByStatus      map[string]int             `json:"by_status"`
	}{s.Requests, s.OK, s.Failed, s.Delayed, s.Duration.Seconds(), s.TargetQPS, s.AchievedQPS,
		s.TTFT, s.E2E, s.HitRate, s.UsageReported, per, byStatus})
}

// MarshalJSON encodes r with snake_case keys and durations in seconds.
func (r Result) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Index            int     `json:"index"`
		Sent             float64 `json:"sent_s"`
		Delay            float64 `json:"delay_s"`
		Delayed          bool    `json:"delayed"`
		Status           int     `json:"status"`
		OK               bool    `json:"ok"`
		Err              string  `json:"err,omitempty"`
		TTFT             float64 `json:"ttft_s"`
		E2E              float64 `json:"e2e_s"`
		InputTokens      int     `json:"input_tokens"`
		MaxTokens        int     `json:"max_tokens"`
		Usage            bool    `json:"usage"`
		PromptTokens     int     `json:"prompt_tokens"`
		CachedTokens     int     `json:"cached_tokens"`
		CompletionTokens int     `json:"completion_tokens"`
		Instance         string  `json:"instance,omitempty"`
	}{r.Index, r.Sent.Seconds(), r.Delay.Seconds(), r.Delayed, r.Status, r.OK(), r.Err, r.TTFT.Seconds(), r.E2E.Seconds(),
		r.InputTokens, r.MaxTokens, r.Usage, r.PromptTokens, r.CachedTokens, r.CompletionTokens, r.Instance})
}
