package main

import (
	"bytes"
	"strings"
	"testing"
)

// `dualmap sim --pd` sizes a P/D pool against a mixed one.
func TestSimCommandPD(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"sim", "--generate", "requests=400,seed=3", "--qps", "1", "--pd", "4,2:2", "--warmup", "100", "--quiet"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("dualmap sim --pd exited %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"| 1 | 4 mixed | dualmap |", "| 1 | 2P+2D | dualmap + decode-capacity |", "| 1 | 2P+2D | round-robin |", "remote prefills"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 2+2*3 {
		t.Errorf("table has %d lines, want the header and 6 rows:\n%s", n, out)
	}
}

func TestSimCommandPDErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"bad split", []string{"sim", "--generate", "requests=50", "--qps", "1", "--pd", "2:x", "--quiet"}, "--pd"},
		{"zero prefill", []string{"sim", "--generate", "requests=50", "--qps", "1", "--pd", "0:4", "--quiet"}, "--pd"},
		{"no qps", []string{"sim", "--generate", "requests=50", "--pd", "2:2", "--quiet"}, "--pd needs --qps"},
		{"variant", []string{"sim", "--generate", "requests=50", "--qps", "1", "--pd", "2:2", "--policies", "dualmap(tie=0.2)", "--quiet"}, "policy names"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("run(%q) = %d, stderr %q, want non-zero and %q", tt.args, code, stderr.String(), tt.want)
			}
		})
	}
}
