package extproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/dualmap/dualmap/scheduler"
)

// TestClassify pins the HTTP answer of every error the request path
// returns, wrapped as the callers wrap them. scheduler.ErrBadRequest means
// the router handed the scheduler an inconsistent request (it builds every
// request from a parsed, tokenized prompt, so a client cannot cause one):
// a router bug, hence 500 like any other unexpected error, not 400.
func TestClassify(t *testing.T) {
	tests := []struct {
		err    error
		status int
		kind   string
		code   string
	}{
		{errModelNotFound, 404, "model_not_found", "model_not_found"},
		{errBadSLO, 400, "bad_request", "bad_slo"},
		{errBadPriority, 400, "bad_request", "bad_priority"},
		{errTokenize, 400, "tokenize", "tokenize"},
		{errSubset, 503, "subset", "no_endpoint_in_subset"},
		{errRouteSetting, 503, "route_setting", "route_misconfigured"},
		{scheduler.ErrShed, 429, "shed", "shed"},
		{scheduler.ErrNoEndpoint, 503, "no_endpoint", "no_healthy_upstream"},
		{scheduler.ErrQueueTimeout, 429, "queue_timeout", "queue_timeout"},
		{scheduler.ErrLate, 503, "late", "slo_unreachable"},
		{errTooManyStreams, 429, kindTooManyStreams, "too_many_streams"},
		{errBufferFull, 429, kindBufferFull, "buffer_full"},
		{scheduler.ErrBadRequest, 500, "internal", "internal"},
		{errors.New("boom"), 500, "internal", "internal"},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			e := classify(fmt.Errorf("extproc: route: %w", tt.err), 0)
			var body struct {
				Error struct{ Code string } `json:"error"`
			}
			if err := json.Unmarshal(e.body, &body); err != nil {
				t.Fatalf("classify(%v) body %q: %v", tt.err, e.body, err)
			}
			if e.status != tt.status || e.kind != tt.kind || body.Error.Code != tt.code {
				t.Errorf("classify(%v) = %d %s %q, want %d %s %q", tt.err, e.status, e.kind, body.Error.Code, tt.status, tt.kind, tt.code)
			}
		})
	}
}
