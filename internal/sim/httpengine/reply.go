package httpengine

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strconv"

	"github.com/dualmap/dualmap/internal/openai"
)

// reply holds what every body of one response shares.
type reply struct {
	id           string
	chat         bool // chat completion, else text completion
	created      int64
	model        string
	output       int       // tokens to generate
	finish       string    // "stop" or "length"
	includeUsage bool      // stream_options.include_usage
	kv           *kvAnswer // a prefill leg's kv_transfer_params (pd.go)
}

// Wire types of OpenAI responses; see the OpenAI API reference.
type (
	body struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   *usage   `json:"usage,omitempty"`
		// KVTransferParams: a prefill leg's answer (pd.go).
		KVTransferParams *kvAnswer `json:"kv_transfer_params,omitempty"`
	}
	choice struct {
		Index        int       `json:"index"`
		Message      *message  `json:"message,omitempty"` // chat, whole response
		Delta        *delta    `json:"delta,omitempty"`   // chat, stream chunk
		Text         *string   `json:"text,omitempty"`    // completion, both
		Logprobs     *struct{} `json:"logprobs"`          // always null
		FinishReason *string   `json:"finish_reason"`
	}
	message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	delta struct {
		Role    string `json:"role,omitempty"`
		Content string `json:"content,omitempty"`
	}
	usage struct {
		PromptTokens        int           `json:"prompt_tokens"`
		CompletionTokens    int           `json:"completion_tokens"`
		TotalTokens         int           `json:"total_tokens"`
		PromptTokensDetails promptDetails `json:"prompt_tokens_details"`
	}
	promptDetails struct {
		CachedTokens int `json:"cached_tokens"`
	}
)

func (r *reply) usage(p progress) *usage {
	return &usage{
		PromptTokens:        p.PromptTokens,
		CompletionTokens:    p.Generated,
		TotalTokens:         p.PromptTokens + p.Generated,
		PromptTokensDetails: promptDetails{CachedTokens: p.CachedTokens},
	}
}

// whole is the non-streaming response: object chat.completion or
// text_completion, the full output and usage.
func (r *reply) whole(p progress) body {
	if p.Capped {
		r.finish = "length" // as vLLM, at max_model_len
	}
	c := choice{FinishReason: &r.finish}
	out := output(p.Generated)
	object := "text_completion"
	if r.chat {
		object = "chat.completion"
		c.Message = &message{Role: "assistant", Content: out}
	} else {
		c.Text = &out
	}
	return body{ID: r.id, Object: object, Created: r.created, Model: r.model, Choices: []choice{c}, Usage: r.usage(p), KVTransferParams: r.kv}
}

// chunk is stream chunk i: token i's text (the first chat chunk also
// carries the role), or, for i == output, the closing chunk with an empty
// delta and the finish reason.
func (r *reply) chunk(i int) body {
	c := choice{}
	var text string
	if i < r.output {
		text = piece(i)
	} else {
		c.FinishReason = &r.finish
	}
	object := "text_completion"
	if r.chat {
		object = "chat.completion.chunk"
		c.Delta = &delta{Content: text}
		if i == 0 {
			c.Delta.Role = "assistant"
		}
	} else {
		c.Text = &text
	}
	return body{ID: r.id, Object: object, Created: r.created, Model: r.model, Choices: []choice{c}}
}

// usageChunk is the stream's last chunk before [DONE] when the client asked
// for usage: no choices, only usage.
func (r *reply) usageChunk(p progress) body {
	object := "text_completion"
	if r.chat {
		object = "chat.completion.chunk"
	}
	return body{ID: r.id, Object: object, Created: r.created, Model: r.model, Choices: []choice{}, Usage: r.usage(p)}
}

// idPrefix is the OpenAI id prefix of a kind of response.
func idPrefix(chat bool) string {
	if chat {
		return "chatcmpl-"
	}
	return "cmpl-"
}

// newID returns the id of the n-th request of the instance named name:
// the kind's prefix, a hash of the name and n, unique across instances.
func newID(chat bool, name string, n int64) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return idPrefix(chat) + strconv.FormatUint(uint64(h.Sum32()), 16) + "-" + strconv.FormatInt(n, 10)
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "encoding the response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// writeError answers status with an OpenAI error body of the given type.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	e := &openai.Error{Status: status, Type: typ, Message: msg}
	writeRaw(w, status, e.JSON())
}

// writeRaw answers status with a JSON body already encoded.
func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
