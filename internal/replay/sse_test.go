package replay

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"two events", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"no space after colon", "data:a\n\n", []string{"a"}},
		{"only one space stripped", "data:  a\n\n", []string{" a"}},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"comments and other fields", ": ping\n\nevent: message\nid: 3\nretry: 10\ndata: a\n\n", []string{"a"}},
		{"extra blank lines", "\n\n\ndata: a\n\n\n\ndata: b\n\n", []string{"a", "b"}},
		{"last event without blank line", "data: a\n\ndata: b", []string{"a", "b"}},
		{"last event without newline at all", "data: [DONE]", []string{"[DONE]"}},
		{"empty data", "data:\n\n", []string{""}},
		{"field without colon", "data\n\n", []string{""}},
		{"empty body", "", nil},
		{"comment only", ": x\n\n", nil},
	}
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one byte at a time", iotest.OneByteReader},
		{"half at a time", iotest.HalfReader},
	}
	for _, tt := range tests {
		for _, rd := range readers {
			t.Run(tt.name+"/"+rd.name, func(t *testing.T) {
				s := newSSEReader(rd.wrap(strings.NewReader(tt.in)))
				var got []string
				for {
					data, err := s.next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("next() error = %v", err)
					}
					got = append(got, string(data))
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("next() events = %q, want %q", got, tt.want)
				}
			})
		}
	}
}

func TestSSEReaderError(t *testing.T) {
	boom := errors.New("boom")
	s := newSSEReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)))
	if data, err := s.next(); err != nil || string(data) != "a" {
		t.Fatalf("next() = %q, %v, want \"a\", nil", data, err)
	}
	if _, err := s.next(); !errors.Is(err, boom) {
		t.Errorf("next() error = %v, want %v", err, boom)
	}
}

func TestReadStream(t *testing.T) {
	const (
		role    = `data: {"choices":[{"delta":{"role":"assistant","content":""}}]}` + "\n\n"
		content = `data: {"choices":[{"delta":{"content":"hi"}}]}` + "\n\n"
		text    = `data: {"choices":[{"text":"hi"}]}` + "\n\n"
		usageCh = `data: {"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":64}}}` + "\n\n"
		done    = "data: [DONE]\n\n"
	)
	tests := []struct {
		name                   string
		in                     string
		wantErr                string
		wantUsage              bool
		wantPrompt, wantCached int
		wantCompletion         int
	}{
		{"chat with usage", role + content + content + usageCh + done, "", true, 100, 64, 5},
		{"completions", text + usageCh + done, "", true, 100, 64, 5},
		{"no usage", content + done, "", false, 0, 0, 0},
		{"no DONE", content + usageCh, "", true, 100, 64, 5},
		{"after DONE ignored", content + done + "data: not json\n\n", "", false, 0, 0, 0},
		{"usage without details", content + `data: {"usage":{"prompt_tokens":7,"completion_tokens":1}}` + "\n\n" + done, "", true, 7, 0, 1},
		{"error event", content + `data: {"error":{"message":"engine died","code":500}}` + "\n\n", "engine died", false, 0, 0, 0},
		{"bad JSON", "data: {oops\n\n", "bad response JSON", false, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res Result
			err := readStream(iotest.OneByteReader(strings.NewReader(tt.in)), time.Now().Add(-time.Second), &res)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("readStream() error = %v, want %q", err, tt.wantErr)
			}
			if res.Usage != tt.wantUsage || res.PromptTokens != tt.wantPrompt || res.CachedTokens != tt.wantCached || res.CompletionTokens != tt.wantCompletion {
				t.Errorf("readStream() usage = %v %d/%d/%d, want %v %d/%d/%d", res.Usage, res.PromptTokens, res.CachedTokens, res.CompletionTokens,
					tt.wantUsage, tt.wantPrompt, tt.wantCached, tt.wantCompletion)
			}
			if res.TTFT <= 0 || res.TTFT > res.E2E {
				t.Errorf("readStream() TTFT = %v, E2E = %v, want 0 < TTFT <= E2E", res.TTFT, res.E2E)
			}
		})
	}
}
