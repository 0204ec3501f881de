//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// reply is what a client saw for one request.
type reply struct {
	status   int
	header   http.Header
	body     []byte
	chunks   int // SSE data events with content
	done     bool
	cached   int
	err      error
	instance string // x-dualmap-instance: the router's decision
	engine   string // x-engine-name: who served it
}

func chatBody(system, user string, stream bool, maxTokens int) []byte {
	b, _ := json.Marshal(map[string]any{
		"model": "dualmap-sim", "stream": stream, "max_tokens": maxTokens,
		"messages": []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": user}},
	})
	return b
}

var client = &http.Client{Timeout: 60 * time.Second}

// newPost is a JSON POST of body to the stack's path, with hdr as
// name, value pairs.
func (s *stack) newPost(path string, body []byte, hdr []string) *http.Request {
	req, _ := http.NewRequest("POST", s.url+path, bytes.NewReader(body))
	req.Header.Set("content-type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

func (s *stack) post(path string, body []byte, hdr ...string) reply {
	resp, err := client.Do(s.newPost(path, body, hdr))
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode, header: resp.Header,
		instance: resp.Header.Get("x-dualmap-instance"), engine: resp.Header.Get("x-engine-name")}
	if strings.HasPrefix(resp.Header.Get("content-type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			data := strings.TrimPrefix(line, "data: ")
			if data == "[DONE]" {
				r.done = true
				continue
			}
			var ch struct {
				Choices []struct {
					Delta struct {
						Content string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if json.Unmarshal([]byte(data), &ch) == nil && len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
				r.chunks++
			}
		}
		r.err = sc.Err()
		return r
	}
	r.body, r.err = io.ReadAll(resp.Body)
	var u struct {
		Usage struct {
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if json.Unmarshal(r.body, &u) == nil {
		r.cached = u.Usage.Details.Cached
	}
	return r
}

func (r reply) String() string {
	return fmt.Sprintf("status %d err %v decision %s served by %s body %.200s", r.status, r.err, r.instance, r.engine, r.body)
}
