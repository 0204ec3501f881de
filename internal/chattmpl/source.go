package chattmpl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Settings of a pool's chat_template (see Resolve).
const (
	SettingAuto    = "auto"
	SettingBuiltin = "builtin"
)

// Source is where a pool's chat rendering comes from.
type Source struct {
	// Template is the model's chat template; nil means the router's own
	// approximate rendering (package tokenize's builtin one).
	Template *Template
	// From names the file the template came from; for the builtin
	// rendering, why it is used.
	From string
}

// CheckSetting reports whether setting is a valid chat_template value:
// "", "auto", "builtin" or a path; it does not read the path.
func CheckSetting(setting string) error {
	if strings.ContainsRune(setting, 0) {
		return errors.New("chat_template: a path with a NUL byte")
	}
	return nil
}

// Resolve finds the chat template of a pool whose tokenizer.json is at
// tokenizer ("" for the byte approximation) from its chat_template setting:
//
//   - "" or "auto": the model's own, from the files beside the tokenizer
//     (chat_template.jinja when there, as transformers prefers it, else
//     tokenizer_config.json's chat_template); the builtin rendering when
//     there is no tokenizer file or no template beside it (From says which).
//   - "builtin": the router's own approximate rendering.
//   - a path: a tokenizer_config.json (a name ending in .json) or a Jinja
//     template file.
//
// The special tokens come from the tokenizer_config.json used, or the one
// beside the tokenizer; the added tokens from that and from tokenizer.json.
// A template that does not compile, or a named file that cannot be read or
// parsed, is an error.
func Resolve(setting, tokenizer string) (Source, error) {
	if err := CheckSetting(setting); err != nil {
		return Source{}, err
	}
	var dir string
	if tokenizer != "" {
		dir = filepath.Dir(tokenizer)
	}
	switch setting {
	case SettingBuiltin:
		return Source{From: "builtin: chat_template is builtin"}, nil
	case "", SettingAuto:
		if tokenizer == "" {
			return Source{From: "builtin: the pool has no tokenizer file to find tokenizer_config.json beside"}, nil
		}
		cfgPath := filepath.Join(dir, "tokenizer_config.json")
		cfg, haveCfg, err := readConfig(cfgPath, true)
		if err != nil {
			return Source{}, err
		}
		jinjaPath := filepath.Join(dir, "chat_template.jinja")
		src, haveJinja, err := readTemplateFile(jinjaPath, true)
		if err != nil {
			return Source{}, err
		}
		switch {
		case haveJinja:
			return build(map[string]string{"default": src}, cfg, tokenizer, jinjaPath)
		case haveCfg && len(cfg.Templates) > 0:
			return build(cfg.Templates, cfg, tokenizer, cfgPath)
		}
		return Source{From: "builtin: no chat template in " + dir + " (no chat_template.jinja, no chat_template in tokenizer_config.json)"}, nil
	}
	if strings.HasSuffix(setting, ".json") {
		cfg, _, err := readConfig(setting, false)
		if err != nil {
			return Source{}, err
		}
		if len(cfg.Templates) == 0 {
			return Source{}, fmt.Errorf("chat_template: %s has no chat_template", setting)
		}
		return build(cfg.Templates, cfg, tokenizer, setting)
	}
	src, _, err := readTemplateFile(setting, false)
	if err != nil {
		return Source{}, err
	}
	var cfg TokenizerConfig
	if dir != "" {
		if cfg, _, err = readConfig(filepath.Join(dir, "tokenizer_config.json"), true); err != nil {
			return Source{}, err
		}
	}
	return build(map[string]string{"default": src}, cfg, tokenizer, setting)
}

func build(templates map[string]string, cfg TokenizerConfig, tokenizer, from string) (Source, error) {
	added := cfg.Added
	if tokenizer != "" {
		more, err := ReadAddedTokens(tokenizer)
		if err != nil {
			return Source{}, err
		}
		added = append(added, more...)
	}
	t, err := CompileNamed(templates, Options{Special: cfg.Special, Added: added})
	if err != nil {
		return Source{}, fmt.Errorf("%s: %w", from, err)
	}
	return Source{Template: t, From: from}, nil
}

// readConfig reads and parses a tokenizer_config.json; a missing file is
// (zero, false, nil) when optional.
func readConfig(path string, optional bool) (TokenizerConfig, bool, error) {
	data, ok, err := readBounded(path, MaxConfigBytes, optional)
	if err != nil || !ok {
		return TokenizerConfig{}, false, err
	}
	cfg, err := ParseTokenizerConfig(data)
	if err != nil {
		return TokenizerConfig{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, true, nil
}

func readTemplateFile(path string, optional bool) (string, bool, error) {
	data, ok, err := readBounded(path, MaxTemplateBytes, optional)
	return string(data), ok, err
}

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int64, optional bool) ([]byte, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("chat_template: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("chat_template: %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, false, fmt.Errorf("chat_template: %s: more than the %d bytes accepted", path, limit)
	}
	return data, true, nil
}

// ReadAddedTokens returns the added_tokens of a tokenizer.json, reading
// nothing else of it into memory.
func ReadAddedTokens(path string) ([]AddedToken, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("chat_template: added tokens: %w", err)
	}
	defer f.Close()
	toks, err := decodeAddedTokens(io.LimitReader(f, MaxConfigBytes))
	if err != nil {
		return nil, fmt.Errorf("chat_template: added tokens of %s: %w", path, err)
	}
	return toks, nil
}

// decodeAddedTokens reads a tokenizer.json object's "added_tokens" array,
// skipping the other members.
func decodeAddedTokens(r io.Reader) ([]AddedToken, error) {
	d := json.NewDecoder(r)
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("want a JSON object")
	}
	var out []AddedToken
	for d.More() {
		kt, err := d.Token()
		if err != nil {
			return nil, err
		}
		if kt != "added_tokens" {
			var skip struct{}
			if err := d.Decode(&skip); err != nil {
				var ute *json.UnmarshalTypeError
				if !errors.As(err, &ute) {
					return nil, err
				}
			}
			continue
		}
		if out, err = decodeAddedList(d); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodeAddedList(d *json.Decoder) ([]AddedToken, error) {
	if tok, err := d.Token(); err != nil || tok != json.Delim('[') {
		return nil, errors.New("added_tokens: want an array")
	}
	var out []AddedToken
	for d.More() {
		if len(out) >= MaxAddedTokens {
			return nil, fmt.Errorf("added_tokens: more than the %d accepted", MaxAddedTokens)
		}
		var t AddedToken
		if err := d.Decode(&t); err != nil {
			return nil, fmt.Errorf("added_tokens[%d]: %w", len(out), err)
		}
		if t.Content == "" || len(t.Content) > MaxTokenBytes {
			return nil, fmt.Errorf("added_tokens[%d]: want a content of 1 to %d bytes, got %d", len(out), MaxTokenBytes, len(t.Content))
		}
		out = append(out, t)
	}
	_, err := d.Token()
	return out, err
}
