package trace

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestWrite(t *testing.T) {
	tr := &Trace{BlockSize: 512, Requests: []Request{
		{Arrival: 0, InputTokens: 6758, OutputTokens: 500, Blocks: []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}},
		{Arrival: 1500 * time.Microsecond, InputTokens: 1, OutputTokens: 0, Blocks: []uint64{18446744073709551615}},
		{Arrival: 3*time.Second + 7, InputTokens: 1000, OutputTokens: 2, Blocks: []uint64{0, 14}},
	}}
	want := `{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}
{"timestamp": 1.5, "input_length": 1, "output_length": 0, "hash_ids": [18446744073709551615]}
{"timestamp": 3000.000007, "input_length": 1000, "output_length": 2, "hash_ids": [0, 14]}
`
	var buf bytes.Buffer
	if err := Write(&buf, tr); err != nil {
		t.Fatalf("Write() error = %v", err)
	}
	if buf.String() != want {
		t.Errorf("Write() = %q, want %q", buf.String(), want)
	}
	got, err := Read(&buf, Options{})
	if err != nil {
		t.Fatalf("Read(Write()) error = %v", err)
	}
	if !reflect.DeepEqual(got, tr) {
		t.Errorf("Read(Write(t)) = %+v, want %+v", got, tr)
	}
}

func TestWriteRoundTripConversation(t *testing.T) {
	tr, err := Read(bytes.NewReader(readConversation(t)), Options{Limit: 2000})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, tr); err != nil {
		t.Fatalf("Write() error = %v", err)
	}
	got, err := Read(&buf, Options{})
	if err != nil {
		t.Fatalf("Read(Write()) error = %v", err)
	}
	if !reflect.DeepEqual(got, tr) {
		t.Errorf("Read(Write(t)) differs from t")
	}
}

func TestWriteInvalid(t *testing.T) {
	ok := Request{InputTokens: 1, Blocks: []uint64{1}}
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"negative arrival", Request{Arrival: -1, InputTokens: 1, Blocks: []uint64{1}}, "trace: Write: request 1: invalid request: arrival -1ns is negative"},
		{"no input", Request{Blocks: []uint64{1}}, "trace: Write: request 1: invalid request: input tokens must be >= 1, got 0"},
		{"negative output", Request{InputTokens: 1, OutputTokens: -2, Blocks: []uint64{1}}, "trace: Write: request 1: invalid request: output tokens must be >= 0, got -2"},
		{"no blocks", Request{InputTokens: 1}, "trace: Write: request 1: invalid request: no blocks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, &Trace{BlockSize: 512, Requests: []Request{ok, tt.req}})
			if !errors.Is(err, ErrInvalidRequest) || err.Error() != tt.want {
				t.Errorf("Write() error = %v, want %q", err, tt.want)
			}
			if buf.Len() != 0 {
				t.Errorf("Write() wrote %q before failing", buf.String())
			}
		})
	}
	if err := Write(&bytes.Buffer{}, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Write(nil) error = %v, want ErrInvalidArgument", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteError(t *testing.T) {
	tr := &Trace{Requests: []Request{{InputTokens: 1, Blocks: []uint64{1}}}}
	if err := Write(failingWriter{}, tr); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Write() error = %v, want the writer's error", err)
	}
}
