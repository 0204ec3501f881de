package httpengine

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestNewDefaults(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	o := s.Options()
	tests := []struct {
		name      string
		got, want any
	}{
		{"profile", o.Profile.Name, DefaultProfile},
		{"block size", o.BlockSize, DefaultBlockSize},
		{"profile block size", o.Profile.BlockSize, DefaultBlockSize},
		{"model", o.Model, DefaultModel},
		{"time scale", o.TimeScale, float64(DefaultTimeScale)},
		{"output tokens", o.OutputTokens, DefaultOutputTokens},
		{"name", o.Name, DefaultName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("Options() %s = %v, want %v", tt.name, tt.got, tt.want)
			}
		})
	}
}

func TestNewInvalid(t *testing.T) {
	tests := []struct {
		name string
		opt  Options
		want string
	}{
		{"negative block size", Options{BlockSize: -1}, "BlockSize"},
		{"negative time scale", Options{TimeScale: -2}, "TimeScale"},
		{"NaN time scale", Options{TimeScale: math.NaN()}, "TimeScale"},
		{"infinite time scale", Options{TimeScale: math.Inf(1)}, "TimeScale"},
		{"negative output", Options{OutputTokens: -1}, "OutputTokens"},
		{"error rate above 1", Options{ErrorRate: 1.5}, "error rate"},
		{"negative latency", Options{AddedLatency: -time.Second}, "latency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New(%+v) error = %v, want one mentioning %q", tt.opt, err, tt.want)
			}
		})
	}
}

func TestOutputTokens(t *testing.T) {
	tests := []struct {
		name       string
		def, max   int
		ignoreEOS  bool
		want       int
		wantFinish string
	}{
		{"no max_tokens", 64, 0, false, 64, "stop"},
		{"max_tokens lower", 64, 10, false, 10, "length"},
		{"max_tokens equal", 64, 64, false, 64, "length"},
		{"max_tokens higher", 64, 100, false, 64, "stop"},
		{"ignore_eos", 64, 100, true, 100, "length"},
		{"ignore_eos without max_tokens", 64, 0, true, 64, "stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, finish := outputTokens(tt.def, tt.max, tt.ignoreEOS)
			if n != tt.want || finish != tt.wantFinish {
				t.Errorf("outputTokens(%d, %d, %v) = %d, %q, want %d, %q", tt.def, tt.max, tt.ignoreEOS, n, finish, tt.want, tt.wantFinish)
			}
		})
	}
}

func TestOutputText(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{0, ""},
		{1, "token0"},
		{3, "token0 token1 token2"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := output(tt.n); got != tt.want {
				t.Errorf("output(%d) = %q, want %q", tt.n, got, tt.want)
			}
		})
	}
}
