package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestKVEvents(t *testing.T) {
	pool := func(kv string) string {
		return "pools:\n  - block_size: 16\n    instances: [{address: 10.0.0.1:8000}]\n    kv_events: " + kv + "\n"
	}
	tests := []struct {
		name, kv string
		wantErr  string // a substring of the error, "" for none
	}{
		{"defaults", "{enabled: true}", ""},
		{"bind", "{enabled: true, mode: bind, bind: 'tcp://0.0.0.0:5557', replay_port: 5558, ranks: 2}", ""},
		{"bad mode", "{enabled: true, mode: push}", "pools[0].kv_events"},
		{"bind without an address", "{enabled: true, mode: bind}", "bind"},
		{"bind not tcp", "{enabled: true, mode: bind, bind: 'ipc:///tmp/x'}", "tcp://"},
		{"ranks beyond the ports", "{enabled: true, port: 65535, ranks: 2}", "ranks"},
		{"negative replay port", "{enabled: true, replay_port: -1}", "replay_port"},
		{"disabled: not checked", "{enabled: false, mode: push}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(pool(tt.kv)), nil)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Parse() error = %v", err)
			case tt.wantErr != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Parse() error = %v, want ErrInvalid naming %q", err, tt.wantErr)
			case err != nil:
				return
			}
			k := c.Pools[0].KVEventsConfig()
			if k.BlockSize != 16 || k.Pool != "default" || k.ReplayTimeout != 2*time.Second || k.Queue != 1024 || k.MaxBlocks != 1<<22 {
				t.Errorf("KVEventsConfig() = %+v, want the pool's block size and the defaults", k)
			}
		})
	}
}
