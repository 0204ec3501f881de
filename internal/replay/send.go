package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// maxBodyBytes caps the non-streaming response body read.
const maxBodyBytes = 64 << 20

// Response headers naming the serving instance, in order of preference.
const (
	HeaderInstance   = "x-dualmap-instance"
	HeaderEngineName = "x-engine-name"
)

// item is one request to send, its token counts already scaled.
type item struct {
	arrival     time.Duration
	blocks      []uint64
	inputTokens int
	maxTokens   int
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// requestBody is a chat completion (Messages) or completion (Prompt)
// request.
type requestBody struct {
	Model         string         `json:"model"`
	Messages      []message      `json:"messages,omitempty"`
	Prompt        string         `json:"prompt,omitempty"`
	MaxTokens     int            `json:"max_tokens"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	IgnoreEOS     bool           `json:"ignore_eos,omitempty"`
}

// sender sends requests. It is safe for concurrent use.
type sender struct {
	client   *http.Client
	url      string
	opt      Options // resolved
	prompter *Prompter
}

// body returns the JSON request body for it.
func (s *sender) body(it item) ([]byte, error) {
	rb := requestBody{Model: s.opt.Model, MaxTokens: it.maxTokens, Stream: s.opt.Stream, IgnoreEOS: s.opt.IgnoreEOS}
	prompt := s.prompter.Prompt(it.blocks, it.inputTokens)
	if s.opt.Endpoint == EndpointChat {
		rb.Messages = []message{{Role: "user", Content: prompt}}
	} else {
		rb.Prompt = prompt
	}
	if s.opt.Stream {
		rb.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	b, err := json.Marshal(rb)
	if err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	return b, nil
}

// send sends it and returns its result, without Index, Sent and Delay.
// It returns when the response has been read, the request failed, or
// runCtx ended (the request is then cancelled).
func (s *sender) send(runCtx context.Context, it item) Result {
	res := Result{InputTokens: it.inputTokens, MaxTokens: it.maxTokens}
	ctx, cancel := context.WithTimeout(runCtx, s.opt.Timeout)
	defer cancel()
	body, err := s.body(it)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		res.Err = err.Error()
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	if s.opt.Stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	for k, v := range s.opt.Headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		res.E2E = time.Since(start)
		res.Err = s.errText(runCtx, err)
		return res
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // let the connection be reused
		resp.Body.Close()
	}()
	res.Status = resp.StatusCode
	res.Instance = resp.Header.Get(HeaderInstance)
	if res.Instance == "" {
		res.Instance = resp.Header.Get(HeaderEngineName)
	}
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, errBodyBytes))
		res.E2E = time.Since(start)
		res.Err = strings.TrimSpace(string(b))
		if rerr != nil && runCtx.Err() != nil {
			res.Err = "cancelled"
		} else if res.Err == "" {
			res.Err = resp.Status
		}
		res.TTFT = res.E2E
		return res
	case s.opt.Stream && isEventStream(resp.Header.Get("Content-Type")):
		err = readStream(resp.Body, start, &res)
	default:
		err = readBody(resp.Body, &res)
		res.E2E = time.Since(start)
		res.TTFT = res.E2E
	}
	if err != nil {
		res.Err = s.errText(runCtx, err)
	}
	return res
}

// errText describes a failed request's error.
func (s *sender) errText(runCtx context.Context, err error) string {
	switch {
	case runCtx.Err() != nil:
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("timeout after %v", s.opt.Timeout)
	}
	return err.Error()
}

func isEventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

// readStream reads a streamed response until [DONE] or its end, setting
// res's TTFT, E2E and usage. start is when the request was sent.
func readStream(body io.Reader, start time.Time, res *Result) error {
	sse := newSSEReader(body)
	first := false
	defer func() {
		res.E2E = time.Since(start)
		if !first {
			res.TTFT = res.E2E
		}
	}()
	for {
		data, err := sse.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading stream: %w", err)
		}
		if string(bytes.TrimSpace(data)) == "[DONE]" {
			return nil
		}
		p, err := parsePayload(data)
		if err != nil {
			return err
		}
		if e := p.errorText(); e != "" {
			return errors.New(e)
		}
		if !first && p.hasContent() {
			res.TTFT, first = time.Since(start), true
		}
		p.record(res)
	}
}

// readBody reads a non-streamed response, setting res's usage.
func readBody(body io.Reader, res *Result) error {
	b, err := io.ReadAll(io.LimitReader(body, maxBodyBytes))
	if err != nil {
		return fmt.Errorf("reading body: %w", err)
	}
	p, err := parsePayload(b)
	if err != nil {
		return err
	}
	if e := p.errorText(); e != "" {
		return errors.New(e)
	}
	p.record(res)
	return nil
}
