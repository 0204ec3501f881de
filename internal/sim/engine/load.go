package engine

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

//go:embed profiles/*.json
var embedded embed.FS

// Profiles returns the names of the embedded profiles, sorted.
func Profiles() []string {
	entries, err := fs.ReadDir(embedded, "profiles")
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// LoadProfile returns a validated profile: the embedded profile of that
// name, or else the JSON file at that path. Unknown JSON fields are errors.
// A file's profile without a name is named after the file (base name without
// .json). Zero limits are left zero (meaning the defaults).
func LoadProfile(name string) (Profile, error) {
	if data, err := embedded.ReadFile("profiles/" + name + ".json"); err == nil && !strings.ContainsAny(name, `/\`) {
		p, err := parseProfile(data)
		if err != nil {
			return Profile{}, fmt.Errorf("engine: embedded profile %q: %w", name, err)
		}
		return p, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Profile{}, fmt.Errorf("engine: unknown profile %q: not embedded (%s) and no such file: %w",
				name, strings.Join(Profiles(), ", "), err)
		}
		return Profile{}, fmt.Errorf("engine: read profile: %w", err)
	}
	p, err := decodeProfile(data)
	if err != nil {
		return Profile{}, fmt.Errorf("engine: profile file %s: %w", name, err)
	}
	if p.Name == "" {
		p.Name = strings.TrimSuffix(filepath.Base(name), ".json")
	}
	if err := p.Validate(); err != nil {
		return Profile{}, fmt.Errorf("engine: profile file %s: %w", name, err)
	}
	return p, nil
}

// parseProfile decodes and validates one JSON profile.
func parseProfile(data []byte) (Profile, error) {
	p, err := decodeProfile(data)
	if err != nil {
		return Profile{}, err
	}
	if err := p.Validate(); err != nil {
		return Profile{}, err
	}
	return p, nil
}

// decodeProfile decodes exactly one JSON object with only known fields.
func decodeProfile(data []byte) (Profile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return Profile{}, fmt.Errorf("engine: parse profile: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Profile{}, errors.New("engine: parse profile: trailing data after the JSON object")
	}
	// An omitted limit means its default; an explicit 0 is a mistake.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Profile{}, fmt.Errorf("engine: parse profile: %w", err)
	}
	for _, k := range []string{"max_batched_tokens", "max_num_seqs", "max_model_len", "block_size"} {
		if v, ok := raw[k]; ok && strings.TrimSpace(string(v)) == "0" {
			return Profile{}, fmt.Errorf("engine: parse profile: %s must be > 0 (omit it for the default), got 0", k)
		}
	}
	return p, nil
}
