package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEmbeddedProfiles(t *testing.T) {
	names := Profiles()
	if len(names) < 2 {
		t.Fatalf("Profiles() = %v, want at least 2", names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			p, err := LoadProfile(name)
			if err != nil {
				t.Fatalf("LoadProfile(%q) error = %v", name, err)
			}
			if p.Name != name {
				t.Errorf("Name = %q, want %q (the file name)", p.Name, name)
			}
			if p.Source == "" || p.Model == "" || p.Hardware == "" {
				t.Errorf("profile %q lacks source, model or hardware", name)
			}
			if err := p.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
			if hbm, dram := p.CacheTokens(); hbm+dram <= 0 {
				t.Errorf("CacheTokens() = %d, %d, want some capacity", hbm, dram)
			}
			if _, err := New(p); err != nil {
				t.Errorf("New() error = %v", err)
			}
		})
	}
}

func TestQwenProfileNumbers(t *testing.T) {
	p, err := LoadProfile("qwen2.5-7b-910b4")
	if err != nil {
		t.Fatal(err)
	}
	if p.PrefillPerToken != 0.00016 || p.KVBytesPerToken != 28*2*4*128*2 || p.DRAMCacheBytes != 64<<30 {
		t.Errorf("LoadProfile() = %+v, want the DualMap paper's numbers", p)
	}
	if hbm, dram := p.CacheTokens(); hbm != 299593 || dram != 1198372 {
		t.Errorf("CacheTokens() = %d, %d, want 299593, 1198372", hbm, dram)
	}
}

// validJSON is a complete valid profile; tests replace one field at a time.
const validJSON = `{"name": "x", "prefill_per_token_s": 0.0001, "decode_step_base_s": 0.01,
 "decode_per_seq_s": 0.0001, "kv_bytes_per_token": 1024, "hbm_cache_bytes": 1073741824}`

func TestParseProfileErrors(t *testing.T) {
	tests := []struct {
		name string
		json string
		want string // in the error
	}{
		{"syntax", `{"name": "x",`, "parse profile"},
		{"unknown field", strings.Replace(validJSON, `"name"`, `"nmae"`, 1), "nmae"},
		{"wrong type", strings.Replace(validJSON, `0.0001,`, `"fast",`, 1), "prefill_per_token_s"},
		{"trailing data", validJSON + `{}`, "trailing"},
		{"no name", strings.Replace(validJSON, `"x"`, `""`, 1), "name"},
		{"negative prefill", strings.Replace(validJSON, `0.0001,`, `-0.0001,`, 1), "prefill_per_token_s"},
		{"zero prefill", strings.Replace(validJSON, `0.0001,`, `0,`, 1), "prefill_per_token_s"},
		{"negative quadratic", validJSON[:len(validJSON)-1] + `, "prefill_quadratic_s": -1}`, "prefill_quadratic_s"},
		{"negative decode", strings.Replace(validJSON, `0.01,`, `-0.01,`, 1), "decode_step_base_s"},
		{"free decode", strings.NewReplacer(`0.01,`, `0,`, `"decode_per_seq_s": 0.0001`, `"decode_per_seq_s": 0`).Replace(validJSON), "decode_step_base_s"},
		{"zero kv", strings.Replace(validJSON, `1024,`, `0,`, 1), "kv_bytes_per_token"},
		{"negative hbm", strings.Replace(validJSON, `1073741824`, `-1`, 1), "hbm_cache_bytes"},
		{"negative dram", validJSON[:len(validJSON)-1] + `, "dram_cache_bytes": -5}`, "dram_cache_bytes"},
		{"negative dram load", validJSON[:len(validJSON)-1] + `, "dram_load_per_token_s": -5}`, "dram_load_per_token_s"},
		{"negative batch", validJSON[:len(validJSON)-1] + `, "max_batched_tokens": -1}`, "max_batched_tokens"},
		{"negative seqs", validJSON[:len(validJSON)-1] + `, "max_num_seqs": -1}`, "max_num_seqs"},
		{"negative model len", validJSON[:len(validJSON)-1] + `, "max_model_len": -1}`, "max_model_len"},
		{"negative block", validJSON[:len(validJSON)-1] + `, "block_size": -512}`, "block_size"},
		{"zero block", validJSON[:len(validJSON)-1] + `, "block_size": 0}`, "block_size"},
		{"zero batch", validJSON[:len(validJSON)-1] + `, "max_batched_tokens": 0}`, "max_batched_tokens"},
		{"unknown model", validJSON[:len(validJSON)-1] + `, "engine_model": "fast"}`, "engine_model"},
		{"negative noise", validJSON[:len(validJSON)-1] + `, "prefill_noise": -0.1}`, "prefill_noise"},
		{"huge noise", validJSON[:len(validJSON)-1] + `, "prefill_noise": 11}`, "prefill_noise"},
		{"noise on legacy", validJSON[:len(validJSON)-1] + `, "prefill_noise": 0.1, "engine_model": "legacy"}`, "prefill_noise"},
		{"negative context cost", validJSON[:len(validJSON)-1] + `, "decode_per_context_token_s": -1e-9}`, "decode_per_context_token_s"},
		{"zero step time", strings.Replace(validJSON, `0.01,`, `0,`, 1), "decode_step_base_s"},
		{"memory below one request", strings.Replace(validJSON, `1073741824`, `1048576`, 1), "hbm_cache_bytes"},
		{"seqs over batch", validJSON[:len(validJSON)-1] + `, "max_batched_tokens": 100}`, "max_num_seqs"},
	}
	if _, err := parseProfile([]byte(validJSON)); err != nil {
		t.Fatalf("parseProfile(validJSON) error = %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseProfile([]byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "engine: ") {
				t.Errorf("parseProfile() error = %v, want an engine error naming %q", err, tt.want)
			}
		})
	}
}

func TestLoadProfileFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "mine.json")
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(validJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"name": "b", "prefill_per_token_s": -1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	unnamed := filepath.Join(dir, "unnamed.json")
	if err := os.WriteFile(unnamed, []byte(strings.Replace(validJSON, `"name": "x", `, ``, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		arg      string
		wantName string
		wantErr  string
	}{
		{"file", good, "x", ""},
		{"unnamed file takes the file name", unnamed, "unnamed", ""},
		{"invalid file", bad, "", "prefill_per_token_s"},
		{"missing", filepath.Join(dir, "nope.json"), "", "unknown profile"},
		{"unknown name", "gpt-9-tpu", "", "qwen2.5-7b-910b4"}, // lists the embedded names
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := LoadProfile(tt.arg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("LoadProfile(%q) error = %v, want one containing %q", tt.arg, err, tt.wantErr)
				}
				return
			}
			if err != nil || p.Name != tt.wantName {
				t.Errorf("LoadProfile(%q) = %q, %v, want %q, nil", tt.arg, p.Name, err, tt.wantName)
			}
		})
	}
}

func FuzzProfileJSON(f *testing.F) {
	f.Add([]byte(validJSON))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"hbm_cache_bytes": 9223372036854775807, "kv_bytes_per_token": 1}`))
	for _, name := range Profiles() {
		data, err := embedded.ReadFile("profiles/" + name + ".json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseProfile(data)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("parseProfile() accepted a profile that Validate() rejects: %v", err)
		}
		p.CacheTokens()
		if _, err := New(p); err != nil {
			t.Fatalf("New() rejected a parsed profile: %v", err)
		}
	})
}
