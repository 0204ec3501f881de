package chattmpl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// Bounds on what ParseTokenizerConfig and ReadAddedTokens accept.
const (
	MaxConfigBytes   = 64 << 20 // a tokenizer_config.json or tokenizer.json
	MaxTemplateBytes = 1 << 20  // one chat template
	MaxTemplates     = 64       // named templates in one config
	MaxAddedTokens   = 1 << 20  // added tokens in one file
	MaxTokenBytes    = 1 << 10  // one special or added token's text
)

// AddedToken is one of a tokenizer's added tokens: text its tokenizer
// matches before any other processing unless Normalized is set.
type AddedToken struct {
	Content    string `json:"content"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	SingleWord bool   `json:"single_word"`
	Special    bool   `json:"special"`
}

// TokenizerConfig is what the router reads of a tokenizer_config.json.
type TokenizerConfig struct {
	// Templates are the chat templates by name: a single template string is
	// named "default"; a list of {"name", "template"} objects keeps its names.
	Templates map[string]string
	// Special maps the special-token variables the template sees
	// (bos_token, eos_token, unk_token, pad_token, sep_token, cls_token,
	// mask_token) to their text; absent or null ones are left out.
	Special map[string]string
	// Added are the tokens of added_tokens_decoder, in id order.
	Added []AddedToken
}

// specialNames are the tokenizer_config.json fields passed to templates as
// variables, as transformers passes its special_tokens_map.
var specialNames = []string{"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"}

// ParseTokenizerConfig reads the chat templates, the special tokens and the
// added tokens of a tokenizer_config.json. Other fields are ignored. A
// config without chat_template is not an error (Templates is then empty);
// a malformed one, or one past the package's bounds, is.
func ParseTokenizerConfig(data []byte) (TokenizerConfig, error) {
	var out TokenizerConfig
	if len(data) > MaxConfigBytes {
		return out, fmt.Errorf("tokenizer config: %d bytes, more than the %d accepted", len(data), MaxConfigBytes)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return out, fmt.Errorf("tokenizer config: %w", err)
	}
	if raw == nil {
		return out, errors.New("tokenizer config: want a JSON object, got null")
	}
	var err error
	if out.Templates, err = parseTemplates(raw["chat_template"]); err != nil {
		return out, err
	}
	out.Special = map[string]string{}
	for _, name := range specialNames {
		v, ok, err := parseTokenText(raw[name])
		if err != nil {
			return out, fmt.Errorf("tokenizer config: %s: %w", name, err)
		}
		if ok {
			out.Special[name] = v
		}
	}
	if out.Added, err = parseAddedDecoder(raw["added_tokens_decoder"]); err != nil {
		return out, err
	}
	return out, nil
}

// parseTemplates reads chat_template: absent or null, a string, or a list
// of named templates.
func parseTemplates(v json.RawMessage) (map[string]string, error) {
	out := map[string]string{}
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return out, nil
	}
	check := func(name, t string) error {
		if len(t) > MaxTemplateBytes {
			return fmt.Errorf("tokenizer config: chat_template %q: %d bytes, more than the %d accepted", name, len(t), MaxTemplateBytes)
		}
		return nil
	}
	switch v[0] {
	case '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fmt.Errorf("tokenizer config: chat_template: %w", err)
		}
		if err := check("default", s); err != nil {
			return nil, err
		}
		out["default"] = s
		return out, nil
	case '[':
		var list []struct {
			Name     *string `json:"name"`
			Template *string `json:"template"`
		}
		if err := json.Unmarshal(v, &list); err != nil {
			return nil, fmt.Errorf("tokenizer config: chat_template: want a string or a list of {\"name\", \"template\"}: %w", err)
		}
		if len(list) > MaxTemplates {
			return nil, fmt.Errorf("tokenizer config: chat_template: %d templates, more than the %d accepted", len(list), MaxTemplates)
		}
		for i, t := range list {
			if t.Name == nil || t.Template == nil {
				return nil, fmt.Errorf("tokenizer config: chat_template[%d]: want both \"name\" and \"template\" strings", i)
			}
			if err := check(*t.Name, *t.Template); err != nil {
				return nil, err
			}
			if _, dup := out[*t.Name]; dup {
				return nil, fmt.Errorf("tokenizer config: chat_template[%d]: duplicate name %q", i, *t.Name)
			}
			out[*t.Name] = *t.Template
		}
		return out, nil
	}
	return nil, errors.New("tokenizer config: chat_template: want a string or a list of {\"name\", \"template\"}")
}

// parseTokenText reads a special token: null, a string, or an AddedToken
// object ({"__type": "AddedToken", "content": ...}).
func parseTokenText(v json.RawMessage) (string, bool, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return "", false, nil
	}
	var s string
	switch v[0] {
	case '"':
		if err := json.Unmarshal(v, &s); err != nil {
			return "", false, err
		}
	case '{':
		var t struct {
			Content *string `json:"content"`
		}
		if err := json.Unmarshal(v, &t); err != nil {
			return "", false, err
		}
		if t.Content == nil {
			return "", false, errors.New("an AddedToken object without \"content\"")
		}
		s = *t.Content
	default:
		return "", false, errors.New("want null, a string or an AddedToken object")
	}
	if len(s) > MaxTokenBytes {
		return "", false, fmt.Errorf("%d bytes, more than the %d accepted", len(s), MaxTokenBytes)
	}
	return s, true, nil
}

// parseAddedDecoder reads added_tokens_decoder: an object from decimal ids
// to AddedToken objects.
func parseAddedDecoder(v json.RawMessage) ([]AddedToken, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return nil, nil
	}
	var m map[string]AddedToken
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, fmt.Errorf("tokenizer config: added_tokens_decoder: %w", err)
	}
	if len(m) > MaxAddedTokens {
		return nil, fmt.Errorf("tokenizer config: added_tokens_decoder: %d tokens, more than the %d accepted", len(m), MaxAddedTokens)
	}
	type idTok struct {
		id  uint64
		tok AddedToken
	}
	list := make([]idTok, 0, len(m))
	for k, t := range m {
		id, err := strconv.ParseUint(k, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("tokenizer config: added_tokens_decoder: key %q is not a token id", k)
		}
		if t.Content == "" || len(t.Content) > MaxTokenBytes {
			return nil, fmt.Errorf("tokenizer config: added_tokens_decoder[%s]: want a content of 1 to %d bytes, got %d", k, MaxTokenBytes, len(t.Content))
		}
		list = append(list, idTok{id, t})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	out := make([]AddedToken, len(list))
	for i, t := range list {
		out[i] = t.tok
	}
	return out, nil
}
