package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRedisRecordKeys(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path string
		want       []string
		err        string
	}{
		{"none", "", nil, ""},
		{"one", file("one", "0123456789abcdef\n"), []string{"0123456789abcdef"}, ""},
		{"rotation: signing key first, blank lines and CRLF ignored", file("two", "new-key-0123456789\r\n\nold-key-0123456789"), []string{"new-key-0123456789", "old-key-0123456789"}, ""},
		{"missing file", filepath.Join(dir, "absent"), nil, "state.redis.record_key_file"},
		{"empty", file("empty", "\n\n"), nil, "holds no key"},
		{"short key", file("short", "tooshort\n"), nil, "at least 16"},
		{"too many", file("many", strings.Repeat("0123456789abcdef\n", 5)), nil, "at most 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			c.State.Redis.RecordKeyFile = tt.path
			keys, err := c.RedisRecordKeys()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("RedisRecordKeys() error = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range keys {
				got = append(got, string(k))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("RedisRecordKeys() = %q, want %q", got, tt.want)
			}
		})
	}
}
