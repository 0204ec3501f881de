package trace

import (
	"bytes"
	"reflect"
	"slices"
	"testing"
)

// FuzzRead checks that Read never panics and that whatever it accepts
// satisfies the Trace invariants; for the Mooncake format it also checks
// that Write then Read gives the same trace back.
func FuzzRead(f *testing.F) {
	seeds := []string{
		`{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}`,
		"{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 0, \"hash_ids\": [7]}\r\n\n{\"timestamp\": 1.25, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [7, 8]}\n",
		`{"timestamp": "2.5", "input_length": 3, "output_length": 1, "hash_ids": [5, 6, 5]}`,
		`{"timestamp": 1e3, "input_length": 5.12e2, "output_length": 0, "hash_ids": [1.0]}`,
		`{"timestamp": 0, "input_length": -1, "output_length": 1, "hash_ids": [1]}`,
		`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [-1, 0.5, 18446744073709551616]}`,
		`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": []}`,
		`{"timestamp": 1e400, "input_length": 1e-400, "output_length": null, "hash_ids": [1e19]}`,
		`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1], "slo_ms": 1500.5}`,
		`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1], "slo_ms": -3}`,
		`[1, 2]`,
		`{"timestamp": 0,`,
		"",
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint8(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		opt := Options{
			SkipMalformed: mode&1 != 0,
			BlockSize:     int(mode>>5) * 100, // 0 is the default 512
			MaxLineBytes:  1 << 12,
		}
		if mode&2 != 0 {
			opt.Format, opt.ChainIDs = FormatGeneric, mode&4 != 0
			opt.TimeUnit = []string{"s", "ms", "us", "ns"}[mode>>3&3]
		}
		tr, err := Read(bytes.NewReader(data), opt)
		if err != nil {
			if opt.SkipMalformed {
				t.Fatalf("Read(SkipMalformed) error = %v", err)
			}
			return
		}
		bs := opt.BlockSize
		if bs == 0 {
			bs = DefaultBlockSize
		}
		if tr.BlockSize != bs {
			t.Fatalf("Read().BlockSize = %d, want %d", tr.BlockSize, bs)
		}
		for i, r := range tr.Requests {
			if len(r.Blocks) == 0 || r.InputTokens < 1 || r.OutputTokens < 0 || r.Arrival < 0 {
				t.Fatalf("Read() request %d = %+v breaks the invariants", i, r)
			}
			if opt.Format != FormatGeneric && len(r.Blocks) != (r.InputTokens+bs-1)/bs {
				t.Fatalf("Read() request %d: %d blocks for %d tokens", i, len(r.Blocks), r.InputTokens)
			}
		}
		if len(tr.Requests) > 0 && tr.Requests[0].Arrival != 0 {
			t.Fatalf("Read() first arrival = %v, want 0", tr.Requests[0].Arrival)
		}
		if !slices.IsSortedFunc(tr.Requests, cmpArrival) {
			t.Fatalf("Read() requests not sorted by arrival")
		}
		nonBlank := 0
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			if !isBlank(line) {
				nonBlank++
			}
		}
		if got := len(tr.Requests) + tr.Skipped; got != nonBlank {
			t.Fatalf("Read() = %d requests + %d skipped, want %d non-blank lines", len(tr.Requests), tr.Skipped, nonBlank)
		}
		if opt.Format == FormatGeneric {
			return
		}
		var buf bytes.Buffer
		if err := Write(&buf, tr); err != nil {
			t.Fatalf("Write(Read()) error = %v", err)
		}
		again, err := Read(&buf, Options{BlockSize: opt.BlockSize})
		if err != nil {
			t.Fatalf("Read(Write(Read())) error = %v", err)
		}
		again.Skipped = tr.Skipped
		if !reflect.DeepEqual(again, tr) {
			t.Fatalf("Read(Write(t)) = %+v, want %+v", again, tr)
		}
	})
}
