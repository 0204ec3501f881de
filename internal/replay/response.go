package replay

import (
	"encoding/json"
	"fmt"
)

// errBodyBytes is how much of an error response's body Result.Err keeps.
const errBodyBytes = 200

// usage is the token usage of an OpenAI-compatible response.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// payload holds the fields of a response body or a stream chunk that
// replay reads, for chat completions and completions alike.
type payload struct {
	Choices []struct {
		Delta *struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"delta"`
		Text string `json:"text"`
	} `json:"choices"`
	Usage *usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// parsePayload decodes one body or chunk.
func parsePayload(data []byte) (payload, error) {
	var p payload
	if err := json.Unmarshal(data, &p); err != nil {
		return p, fmt.Errorf("bad response JSON %s: %w", excerpt(data), err)
	}
	return p, nil
}

// hasContent reports whether p carries generated text: a delta with
// content (or reasoning content), or a completion's text.
func (p *payload) hasContent() bool {
	for _, c := range p.Choices {
		if c.Text != "" || c.Delta != nil && (c.Delta.Content != "" || c.Delta.ReasoningContent != "") {
			return true
		}
	}
	return false
}

// errorText returns the error p reports, or "" if none: the message of an
// {"error": {"message": ...}} object, or the raw value.
func (p *payload) errorText() string {
	if len(p.Error) == 0 || string(p.Error) == "null" {
		return ""
	}
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(p.Error, &e) == nil && e.Message != "" {
		return excerpt([]byte(e.Message))
	}
	var s string
	if json.Unmarshal(p.Error, &s) == nil && s != "" {
		return excerpt([]byte(s))
	}
	return excerpt(p.Error)
}

// record copies p's usage, if any, into r.
func (p *payload) record(r *Result) {
	if p.Usage == nil {
		return
	}
	r.Usage = true
	r.PromptTokens = p.Usage.PromptTokens
	r.CompletionTokens = p.Usage.CompletionTokens
	r.CachedTokens = 0
	if d := p.Usage.PromptTokensDetails; d != nil {
		r.CachedTokens = d.CachedTokens
	}
}

// excerpt returns the first errBodyBytes bytes of b as a string.
func excerpt(b []byte) string {
	if len(b) > errBodyBytes {
		b = b[:errBodyBytes]
	}
	return string(b)
}
