package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Redis password comes from the file state.redis.password_file when it
// is set (trailing CR and LF trimmed, nothing else), else from the
// environment variable state.redis.password_env (default
// DUALMAP_REDIS_PASSWORD).
func TestRedisPassword(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := map[string]string{"DUALMAP_REDIS_PASSWORD": "from-default-env", "MY_PW": "from-my-env"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name   string
		redis  string // the state.redis block's extra keys
		getenv func(string) string
		want   string
	}{
		{name: "file", redis: "password_file: " + write("pw", "s3cret"), getenv: getenv, want: "s3cret"},
		{name: "file with a newline", redis: "password_file: " + write("pw-nl", "s3cret\n"), getenv: getenv, want: "s3cret"},
		{name: "file with CRLF", redis: "password_file: " + write("pw-crlf", "s3cret\r\n"), getenv: getenv, want: "s3cret"},
		{name: "file: spaces are part of it", redis: "password_file: " + write("pw-sp", " s3 cret \n"), getenv: getenv, want: " s3 cret "},
		{name: "file wins over the environment", redis: "password_file: " + write("pw2", "from-file\n") + "\n    password_env: MY_PW", getenv: getenv, want: "from-file"},
		{name: "default environment variable", getenv: getenv, want: "from-default-env"},
		{name: "configured environment variable", redis: "password_env: MY_PW", getenv: getenv, want: "from-my-env"},
		{name: "nothing set", getenv: func(string) string { return "" }, want: ""},
		{name: "no environment", getenv: nil, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := minimal + "state:\n  backend: redis\n  redis:\n    addrs: [127.0.0.1:6379]\n"
			if tt.redis != "" {
				y += "    " + tt.redis + "\n"
			}
			c, err := Parse([]byte(y), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.RedisPassword(tt.getenv)
			if err != nil || got != tt.want {
				t.Errorf("RedisPassword() = %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}

// A password file that cannot be read is an error naming the key when the
// configuration is loaded, never an empty password (which would connect
// without one).
func TestRedisPasswordFileMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	_, err := Parse([]byte(minimal+"state:\n  backend: redis\n  redis:\n    addrs: [127.0.0.1:6379]\n    password_file: "+missing+"\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "state.redis.password_file") || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Parse() error = %v, want an error naming state.redis.password_file and the missing file", err)
	}
}
