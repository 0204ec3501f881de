package trace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestReadValid(t *testing.T) {
	tests := []struct {
		name  string
		input string
		opt   Options
		want  []Request
	}{
		{
			name:  "mooncake lines",
			input: `{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [0, 1]}` + "\n" + `{"timestamp": 3, "input_length": 512, "output_length": 0, "hash_ids": [0]}` + "\n",
			want: []Request{
				{Arrival: 0, InputTokens: 1000, OutputTokens: 5, Blocks: []uint64{0, 1}},
				{Arrival: 3 * time.Millisecond, InputTokens: 512, OutputTokens: 0, Blocks: []uint64{0}},
			},
		},
		{
			name:  "blank lines, CRLF, no final newline, extra fields",
			input: "\n  \r\n" + `{"timestamp":7,"input_length":1,"output_length":1,"hash_ids":[9],"extra":{"a":[1]}}` + "\r\n\t\n" + `{"timestamp":8,"input_length":2,"output_length":1,"hash_ids":[9]}`,
			want: []Request{
				{Arrival: 0, InputTokens: 1, OutputTokens: 1, Blocks: []uint64{9}},
				{Arrival: time.Millisecond, InputTokens: 2, OutputTokens: 1, Blocks: []uint64{9}},
			},
		},
		{
			name: "unsorted timestamps are sorted stably and normalised",
			input: `{"timestamp": 20, "input_length": 1, "output_length": 1, "hash_ids": [1]}
{"timestamp": 10.5, "input_length": 1, "output_length": 2, "hash_ids": [2]}
{"timestamp": 20, "input_length": 1, "output_length": 3, "hash_ids": [3]}
{"timestamp": 10.5, "input_length": 1, "output_length": 4, "hash_ids": [4]}`,
			want: []Request{
				{Arrival: 0, InputTokens: 1, OutputTokens: 2, Blocks: []uint64{2}},
				{Arrival: 0, InputTokens: 1, OutputTokens: 4, Blocks: []uint64{4}},
				{Arrival: 9500 * time.Microsecond, InputTokens: 1, OutputTokens: 1, Blocks: []uint64{1}},
				{Arrival: 9500 * time.Microsecond, InputTokens: 1, OutputTokens: 3, Blocks: []uint64{3}},
			},
		},
		{
			name:  "integral numbers in any notation, largest id",
			input: `{"timestamp": 1e3, "input_length": 5.12E2, "output_length": 0.0, "hash_ids": [1.0, 18446744073709551615, 2e1]}`,
			opt:   Options{BlockSize: 200},
			want:  []Request{{Arrival: 0, InputTokens: 512, OutputTokens: 0, Blocks: []uint64{1, 18446744073709551615, 20}}},
		},
		{
			name:  "block size option",
			input: `{"timestamp": 0, "input_length": 101, "output_length": 1, "hash_ids": [4, 5, 6]}`,
			opt:   Options{BlockSize: 50},
			want:  []Request{{InputTokens: 101, OutputTokens: 1, Blocks: []uint64{4, 5, 6}}},
		},
		{
			name: "generic string timestamps in seconds, no length check",
			input: `{"timestamp": "1.5", "input_length": 10000, "output_length": 1, "hash_ids": [1]}
{"timestamp": " 2.25 ", "input_length": 1, "output_length": 1, "hash_ids": [1, 2, 3]}
{"timestamp": 3, "input_length": 1, "output_length": 1, "hash_ids": [1]}`,
			opt: Options{Format: FormatGeneric, TimeUnit: "s"},
			want: []Request{
				{Arrival: 0, InputTokens: 10000, OutputTokens: 1, Blocks: []uint64{1}},
				{Arrival: 750 * time.Millisecond, InputTokens: 1, OutputTokens: 1, Blocks: []uint64{1, 2, 3}},
				{Arrival: 1500 * time.Millisecond, InputTokens: 1, OutputTokens: 1, Blocks: []uint64{1}},
			},
		},
		{
			name: "generic string timestamps in ns, epoch-sized",
			input: `{"timestamp": "1700000000000000100", "input_length": 1, "output_length": 1, "hash_ids": [1]}
{"timestamp": "1700000000000000000", "input_length": 1, "output_length": 1, "hash_ids": [2]}`,
			opt: Options{Format: FormatGeneric, TimeUnit: "ns"},
			want: []Request{
				{Arrival: 0, InputTokens: 1, OutputTokens: 1, Blocks: []uint64{2}},
				{Arrival: 100, InputTokens: 1, OutputTokens: 1, Blocks: []uint64{1}},
			},
		},
		{
			name:  "generic fractional ms rounds to the nanosecond",
			input: `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n" + `{"timestamp": "0.0000015", "input_length": 1, "output_length": 1, "hash_ids": [1]}`,
			opt:   Options{Format: FormatGeneric},
			want: []Request{
				{Arrival: 0, InputTokens: 1, OutputTokens: 1, Blocks: []uint64{1}},
				{Arrival: 2, InputTokens: 1, OutputTokens: 1, Blocks: []uint64{1}},
			},
		},
		{
			name:  "empty input",
			input: "\n\n",
			want:  nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(strings.NewReader(tt.input), tt.opt)
			if err != nil {
				t.Fatalf("Read() error = %v", err)
			}
			if !reflect.DeepEqual(got.Requests, tt.want) {
				t.Errorf("Read() = %+v, want %+v", got.Requests, tt.want)
			}
			if got.Skipped != 0 {
				t.Errorf("Read().Skipped = %d, want 0", got.Skipped)
			}
		})
	}
}

func TestReadMalformed(t *testing.T) {
	const ok = `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n"
	tests := []struct {
		name    string
		input   string
		opt     Options
		wantMsg string // the whole error message
	}{
		{"bad JSON", ok + `{"timestamp": 0,` + "\n",
			Options{}, "trace: line 2: malformed: invalid JSON at offset 16: unexpected end of JSON input"},
		{"not an object", ok + ok + "[1, 2]\n",
			Options{}, "trace: line 3: malformed: want a JSON object, got array"},
		{"trailing garbage", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]} x`,
			Options{}, "trace: line 1: malformed: invalid JSON at offset 74: invalid character 'x' after top-level value"},
		{"missing hash_ids", "\n" + `{"timestamp": 0, "input_length": 1, "output_length": 1}`,
			Options{}, "trace: line 2: malformed: missing field hash_ids"},
		{"missing timestamp", `{"input_length": 1, "output_length": 1, "hash_ids": [1]}`,
			Options{}, "trace: line 1: malformed: missing field timestamp"},
		{"null output_length", `{"timestamp": 0, "input_length": 1, "output_length": null, "hash_ids": [1]}`,
			Options{}, "trace: line 1: malformed: output_length: want integer, got null"},
		{"negative input_length", `{"timestamp": 0, "input_length": -5, "output_length": 1, "hash_ids": [1]}`,
			Options{}, "trace: line 1: malformed: input_length must be >= 1, got -5"},
		{"zero input_length", `{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": [1]}`,
			Options{}, "trace: line 1: malformed: input_length must be >= 1, got 0"},
		{"negative output_length", `{"timestamp": 0, "input_length": 1, "output_length": -1, "hash_ids": [1]}`,
			Options{}, "trace: line 1: malformed: output_length must be >= 0, got -1"},
		{"string input_length", `{"timestamp": 0, "input_length": "12", "output_length": 1, "hash_ids": [1]}`,
			Options{}, `trace: line 1: malformed: input_length: want integer, got string "12"`},
		{"fractional output_length", `{"timestamp": 0, "input_length": 1, "output_length": 2.5, "hash_ids": [1]}`,
			Options{}, "trace: line 1: malformed: output_length: 2.5 is not an integer"},
		{"huge input_length", `{"timestamp": 0, "input_length": 1e30, "output_length": 1, "hash_ids": [1]}`,
			Options{}, "trace: line 1: malformed: input_length: 1e30 is out of range"},
		{"string timestamp in mooncake", `{"timestamp": "5", "input_length": 1, "output_length": 1, "hash_ids": [1]}`,
			Options{}, `trace: line 1: malformed: timestamp: want number, got string "5" (string timestamps need Format generic)`},
		{"negative timestamp", `{"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": [1]}`,
			Options{}, "trace: line 1: malformed: timestamp must be >= 0, got -1"},
		{"timestamp out of range", `{"timestamp": 1e20, "input_length": 1, "output_length": 1, "hash_ids": [1]}`,
			Options{}, "trace: line 1: malformed: timestamp 1e20 ms is out of range"},
		{"generic non-numeric string timestamp", `{"timestamp": "soon", "input_length": 1, "output_length": 1, "hash_ids": [1]}`,
			Options{Format: FormatGeneric}, `trace: line 1: malformed: timestamp: string "soon" does not hold a number`},
		{"generic boolean timestamp", `{"timestamp": true, "input_length": 1, "output_length": 1, "hash_ids": [1]}`,
			Options{Format: FormatGeneric}, "trace: line 1: malformed: timestamp: want number, got boolean"},
		{"hash_ids not an array", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": 7}`,
			Options{}, "trace: line 1: malformed: hash_ids: want array, got number"},
		{"empty hash_ids", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": []}`,
			Options{Format: FormatGeneric}, "trace: line 1: malformed: hash_ids is empty"},
		{"negative hash id", `{"timestamp": 0, "input_length": 1000, "output_length": 1, "hash_ids": [0, -3]}`,
			Options{}, "trace: line 1: malformed: hash_ids[1] must be >= 0, got -3"},
		{"fractional hash id", `{"timestamp": 0, "input_length": 1000, "output_length": 1, "hash_ids": [0.5, 1]}`,
			Options{}, "trace: line 1: malformed: hash_ids[0]: 0.5 is not an integer"},
		{"hash id too large", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [18446744073709551616]}`,
			Options{}, "trace: line 1: malformed: hash_ids[0]: 18446744073709551616 does not fit in 64 bits"},
		{"string hash id", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": ["a"]}`,
			Options{}, `trace: line 1: malformed: hash_ids[0]: want integer, got string "a"`},
		{"long string hash id is shortened on a rune boundary", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": ["` + strings.Repeat("é", 30) + `"]}`,
			Options{}, `trace: line 1: malformed: hash_ids[0]: want integer, got string "` + strings.Repeat("é", 19) + `...`},
		{"null hash id", `{"timestamp": 0, "input_length": 1000, "output_length": 1, "hash_ids": [1, null]}`,
			Options{}, "trace: line 1: malformed: hash_ids[1]: want integer, got null"},
		{"length mismatch, too few", ok + `{"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [1]}`,
			Options{}, "trace: line 2: malformed: hash_ids has 1 ids, want ceil(input_length 513 / block size 512) = 2"},
		{"length mismatch, too many", `{"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1, 2]}`,
			Options{}, "trace: line 1: malformed: hash_ids has 2 ids, want ceil(input_length 512 / block size 512) = 1"},
		{"over-long line", ok + "\n" + `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1], "pad": "` + strings.Repeat("x", 200) + `"}` + "\n" + ok,
			Options{MaxLineBytes: 100}, "trace: line 3: malformed: line too long: exceeds 100 bytes (Options.MaxLineBytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(strings.NewReader(tt.input), tt.opt)
			if err == nil {
				t.Fatalf("Read() = %+v, want error %q", got, tt.wantMsg)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("Read() error = %q, want %q", err, tt.wantMsg)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("Read() error = %v, want it to wrap ErrMalformed", err)
			}
			tooLong := strings.Contains(tt.wantMsg, "too long")
			if errors.Is(err, ErrLineTooLong) != tooLong {
				t.Errorf("errors.Is(Read() error, ErrLineTooLong) = %v, want %v", !tooLong, tooLong)
			}

			opt := tt.opt
			opt.SkipMalformed = true
			got, err = Read(strings.NewReader(tt.input), opt)
			if err != nil {
				t.Fatalf("Read(SkipMalformed) error = %v", err)
			}
			wantOK := strings.Count(tt.input, ok)
			if got.Skipped != 1 || len(got.Requests) != wantOK {
				t.Errorf("Read(SkipMalformed) = %d requests, %d skipped; want %d, 1", len(got.Requests), got.Skipped, wantOK)
			}
		})
	}
}

func TestReadSkipMalformed(t *testing.T) {
	input := strings.Join([]string{
		`{"timestamp": 5, "input_length": 1, "output_length": 1, "hash_ids": [1]}`,
		`not json`,
		``,
		`{"timestamp": 6, "input_length": 600, "output_length": 1, "hash_ids": [1]}`,
		`{"timestamp": 7, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}`,
		`{"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": [1]}`,
	}, "\n")
	got, err := Read(strings.NewReader(input), Options{SkipMalformed: true})
	if err != nil {
		t.Fatalf("Read() error = %v", err)
	}
	want := []Request{
		{Arrival: 0, InputTokens: 1, OutputTokens: 1, Blocks: []uint64{1}},
		{Arrival: 2 * time.Millisecond, InputTokens: 600, OutputTokens: 1, Blocks: []uint64{1, 2}},
	}
	if got.Skipped != 3 || !reflect.DeepEqual(got.Requests, want) {
		t.Errorf("Read() = %+v skipped %d, want %+v skipped 3", got.Requests, got.Skipped, want)
	}
}

// TestReadLongLine reads a valid line of several MiB, far beyond
// bufio.Scanner's default limit.
func TestReadLongLine(t *testing.T) {
	const n = 500_000
	var b strings.Builder
	b.WriteString(`{"timestamp": 1, "input_length": 256000000, "output_length": 1, "hash_ids": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("1234567")
	}
	b.WriteString("]}\n")
	b.WriteString(`{"timestamp": 2, "input_length": 1, "output_length": 1, "hash_ids": [1]}`)
	if b.Len() < 4<<20 {
		t.Fatalf("test line is only %d bytes", b.Len())
	}
	got, err := Read(strings.NewReader(b.String()), Options{})
	if err != nil {
		t.Fatalf("Read() error = %v", err)
	}
	if len(got.Requests) != 2 || len(got.Requests[0].Blocks) != n {
		t.Errorf("Read() = %d requests, first with %d blocks; want 2, %d", len(got.Requests), len(got.Requests[0].Blocks), n)
	}
}

// TestReadLineCap checks lines around MaxLineBytes and that a skipped
// over-long line does not shift line numbers.
func TestReadLineCap(t *testing.T) {
	line := `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}`
	tests := []struct {
		name        string
		max         int
		eol         string
		wantSkipped int
	}{
		{"exactly at the cap", len(line), "\n", 0},
		{"exactly at the cap, CRLF", len(line), "\r\n", 0},
		{"one byte over", len(line) - 1, "\n", 2},
		{"far over", 10, "\r\n", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := line + tt.eol + line + tt.eol + "{bad" + tt.eol
			got, err := Read(strings.NewReader(input), Options{MaxLineBytes: tt.max, SkipMalformed: true})
			if err != nil {
				t.Fatalf("Read() error = %v", err)
			}
			if got.Skipped != tt.wantSkipped+1 {
				t.Errorf("Read().Skipped = %d, want %d", got.Skipped, tt.wantSkipped+1)
			}
			_, err = Read(strings.NewReader(input), Options{MaxLineBytes: tt.max})
			wantLine := "line 3:"
			if tt.wantSkipped > 0 {
				wantLine = "line 1:"
			}
			if err == nil || !strings.Contains(err.Error(), wantLine) {
				t.Errorf("Read() error = %v, want it at %s", err, wantLine)
			}
		})
	}
}

func TestReadChainIDs(t *testing.T) {
	input := `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [5, 6]}
{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [7, 6]}
{"timestamp": 2, "input_length": 1, "output_length": 1, "hash_ids": [5, 9]}
{"timestamp": 3, "input_length": 1, "output_length": 1, "hash_ids": [5, 6, 6]}`
	got, err := Read(strings.NewReader(input), Options{Format: FormatGeneric, ChainIDs: true})
	if err != nil {
		t.Fatalf("Read() error = %v", err)
	}
	r := got.Requests
	tests := []struct {
		name      string
		a, b      uint64
		wantEqual bool
	}{
		{"[5,6] vs [7,6] at 1: different prefixes", r[0].Blocks[1], r[1].Blocks[1], false},
		{"[5,6] vs [7,6] at 0", r[0].Blocks[0], r[1].Blocks[0], false},
		{"[5,6] vs [5,9] at 0: same prefix", r[0].Blocks[0], r[2].Blocks[0], true},
		{"[5,6] vs [5,9] at 1", r[0].Blocks[1], r[2].Blocks[1], false},
		{"[5,6] vs [5,6,6] at 1: same prefix", r[0].Blocks[1], r[3].Blocks[1], true},
		{"[5,6,6] at 1 vs at 2: repeated content id", r[3].Blocks[1], r[3].Blocks[2], false},
		{"chained value is not the raw id", r[0].Blocks[0], 5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a == tt.b; got != tt.wantEqual {
				t.Errorf("%#x == %#x is %v, want %v", tt.a, tt.b, got, tt.wantEqual)
			}
		})
	}
	plain, err := Read(strings.NewReader(input), Options{Format: FormatGeneric})
	if err != nil {
		t.Fatalf("Read() error = %v", err)
	}
	if want := []uint64{7, 6}; !reflect.DeepEqual(plain.Requests[1].Blocks, want) {
		t.Errorf("Read() without ChainIDs: Blocks = %v, want %v", plain.Requests[1].Blocks, want)
	}
}

func TestReadLimit(t *testing.T) {
	input := `{"timestamp": 9, "input_length": 1, "output_length": 1, "hash_ids": [1]}
{"timestamp": 4, "input_length": 1, "output_length": 2, "hash_ids": [1]}

{"timestamp": 1, "input_length": 1, "output_length": 3, "hash_ids": [1]}
this line is never read`
	tests := []struct {
		limit   int
		wantOut []int // OutputTokens in order
		wantErr bool
	}{
		{1, []int{1}, false},
		{2, []int{2, 1}, false},
		{3, []int{3, 2, 1}, false},
		{4, nil, true},
		{0, nil, true},
	}
	for _, tt := range tests {
		got, err := Read(strings.NewReader(input), Options{Limit: tt.limit})
		if (err != nil) != tt.wantErr {
			t.Fatalf("Read(Limit %d) error = %v, want error %v", tt.limit, err, tt.wantErr)
		}
		if err != nil {
			continue
		}
		var out []int
		for _, r := range got.Requests {
			out = append(out, r.OutputTokens)
		}
		if !reflect.DeepEqual(out, tt.wantOut) || got.Requests[0].Arrival != 0 {
			t.Errorf("Read(Limit %d) = outputs %v first arrival %v, want %v and 0", tt.limit, out, got.Requests[0].Arrival, tt.wantOut)
		}
	}
}

func TestReadInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  Options
		want string // in the message
	}{
		{"unknown format", Options{Format: "csv"}, `Format "csv" unknown`},
		{"unknown time unit", Options{Format: FormatGeneric, TimeUnit: "h"}, `TimeUnit "h" unknown`},
		{"time unit on mooncake", Options{TimeUnit: "s"}, `TimeUnit "s": the mooncake format is always in ms`},
		{"chain ids on mooncake", Options{ChainIDs: true}, "ChainIDs: mooncake hash_ids are already chained"},
		{"negative block size", Options{BlockSize: -1}, "BlockSize must be >= 1, got -1"},
		{"negative limit", Options{Limit: -2}, "Limit must be >= 0, got -2"},
		{"negative max line", Options{MaxLineBytes: -1}, "MaxLineBytes must be >= 0, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(""), tt.opt)
			if !errors.Is(err, ErrInvalidOptions) || !strings.HasPrefix(err.Error(), "trace: invalid options: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Read() error = %v, want ErrInvalidOptions mentioning %q", err, tt.want)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.jsonl")
	data := `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n{\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path, Options{})
	if want := "trace: " + path + ": line 2: malformed: "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("ReadFile() error = %v, want prefix %q", err, want)
	}
	got, err := ReadFile(path, Options{Limit: 1})
	if err != nil || len(got.Requests) != 1 || got.Source != path {
		t.Errorf("ReadFile(Limit 1) = %+v, %v; want 1 request from %s", got, err, path)
	}
	_, err = ReadFile(filepath.Join(dir, "missing.jsonl"), Options{})
	if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "trace: ") {
		t.Errorf("ReadFile(missing) error = %v, want a wrapped os.ErrNotExist", err)
	}
}

// failingReader returns data, then err.
type failingReader struct {
	data string
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.data == "" {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestReadIOError(t *testing.T) {
	boom := errors.New("boom")
	r := &failingReader{data: `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n{", err: boom}
	_, err := Read(r, Options{})
	if !errors.Is(err, boom) || errors.Is(err, ErrMalformed) || err.Error() != "trace: line 2: read: boom" {
		t.Errorf("Read() error = %v, want %q wrapping the reader's error", err, "trace: line 2: read: boom")
	}
}
