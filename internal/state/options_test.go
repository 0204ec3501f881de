package state

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewRedisOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  RedisOptions
		ok   bool
	}{
		{"defaults", RedisOptions{Addrs: []string{"127.0.0.1:6379"}}, true},
		{"cluster", RedisOptions{Addrs: []string{"a:1", "b:1", "c:1"}}, true},
		{"sentinel", RedisOptions{Addrs: []string{"s:26379"}, MasterName: "mymaster"}, true},
		{"no addrs", RedisOptions{}, false},
		{"brace in pool", RedisOptions{Addrs: []string{"a:1"}, Pool: "p}"}, false},
		{"brace in prefix", RedisOptions{Addrs: []string{"a:1"}, Prefix: "{x"}, false},
		{"tiny flush", RedisOptions{Addrs: []string{"a:1"}, Flush: time.Microsecond}, false},
		{"negative flush", RedisOptions{Addrs: []string{"a:1"}, Flush: -time.Second}, false},
		{"negative stream cap", RedisOptions{Addrs: []string{"a:1"}, StreamMaxLen: -1}, false},
		{"negative buffer", RedisOptions{Addrs: []string{"a:1"}, Buffer: -1}, false},
		{"negative db", RedisOptions{Addrs: []string{"a:1"}, DB: -1}, false},
		{"non-UTF-8 replica", RedisOptions{Addrs: []string{"a:1"}, Replica: "\xff"}, false},
		{"limits", RedisOptions{Addrs: []string{"a:1"}, MaxReplyBytes: 1 << 10, MaxReplyElements: 64, MaxReplyTotal: 1 << 12, MaxSplits: 10, MaxKeyDepthBytes: 1 << 10, MaxLoadRequests: 1, MaxLoadTokens: 1, MaxReplicas: 1}, true},
		{"tiny reply bound", RedisOptions{Addrs: []string{"a:1"}, MaxReplyBytes: 63}, false},
		{"huge reply bound", RedisOptions{Addrs: []string{"a:1"}, MaxReplyBytes: 1<<40 + 1}, false},
		{"negative reply elements", RedisOptions{Addrs: []string{"a:1"}, MaxReplyElements: -1}, false},
		{"reply total below one bulk", RedisOptions{Addrs: []string{"a:1"}, MaxReplyBytes: 1 << 20, MaxReplyTotal: 1 << 19}, false},
		{"key depth above a reply", RedisOptions{Addrs: []string{"a:1"}, MaxReplyBytes: 1 << 10, MaxKeyDepthBytes: 1 << 11}, false},
		{"negative splits", RedisOptions{Addrs: []string{"a:1"}, MaxSplits: -1}, false},
		{"negative load bound", RedisOptions{Addrs: []string{"a:1"}, MaxLoadTokens: -1}, false},
		{"negative replicas", RedisOptions{Addrs: []string{"a:1"}, MaxReplicas: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewRedis(tt.opt)
			if s != nil {
				t.Cleanup(func() { _ = s.Close() })
			}
			if tt.ok && err != nil {
				t.Errorf("NewRedis() error = %v, want nil", err)
			}
			if !tt.ok && !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("NewRedis() error = %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	o := RedisOptions{Addrs: []string{"a:1"}}.withDefaults()
	if o.Prefix != "dualmap" || o.Pool != "default" || o.Flush != 10*time.Millisecond ||
		o.StreamMaxLen != 200_000 || o.Buffer != 1<<20 || o.Logger == nil ||
		o.MaxReplyBytes != 16<<20 || o.MaxReplyElements != 1<<20 || o.MaxReplyTotal != 128<<20 ||
		o.MaxSplits != 4096 || o.MaxKeyDepthBytes != 16*4096+4096 || o.MaxLoadRequests != 1<<16 ||
		o.MaxLoadTokens != 1<<24 || o.MaxReplicas != 1024 {
		t.Errorf("withDefaults() = %+v", o)
	}
	if strings.Count(o.Replica, "-") < 2 {
		t.Errorf("default Replica = %q, want hostname-pid-random", o.Replica)
	}
	if other := (RedisOptions{}).withDefaults().Replica; other == o.Replica {
		t.Errorf("two default Replica ids are both %q, want distinct", o.Replica)
	}
}

func TestKeys(t *testing.T) {
	k := newKeys("dualmap", "chat")
	tests := []struct{ got, want string }{
		{k.stream, "{dualmap:chat}:kv"},
		{k.replicas, "{dualmap:chat}:replicas"},
		{k.leader, "{dualmap:chat}:kd:leader"},
		{k.keyDepth, "{dualmap:chat}:kd"},
		{k.load("r1"), "{dualmap:chat}:load:r1"},
		{k.lease("10.0.0.1:8000"), "{dualmap:chat}:mig:10.0.0.1:8000"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("key = %q, want %q", tt.got, tt.want)
		}
	}
}
