package state

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

var (
	keyOld = []byte("0123456789abcdef-old")
	keyNew = []byte("0123456789abcdef-new")
)

func TestSealUnseal(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	state := []byte("\x0a\x05state")
	sealed := string(seal(keyOld, "p", "r1", now, state))
	tests := []struct {
		name    string
		keys    [][]byte
		pool    string
		replica string
		at      time.Time
		v       string
		want    string // "" with err
		err     bool
	}{
		{"opens under its key", [][]byte{keyOld}, "p", "r1", now, sealed, string(state), false},
		{"opens under the second key (rotation)", [][]byte{keyNew, keyOld}, "p", "r1", now.Add(time.Second), sealed, string(state), false},
		{"another key", [][]byte{keyNew}, "p", "r1", now, sealed, "", true},
		{"moved to another replica", [][]byte{keyOld}, "p", "r2", now, sealed, "", true},
		{"another pool", [][]byte{keyOld}, "q", "r1", now, sealed, "", true},
		{"too old", [][]byte{keyOld}, "p", "r1", now.Add(31 * time.Second), sealed, "", true},
		{"too far ahead", [][]byte{keyOld}, "p", "r1", now.Add(-31 * time.Second), sealed, "", true},
		{"a state changed after sealing", [][]byte{keyOld}, "p", "r1", now, sealed[:len(sealed)-1] + "X", "", true},
		{"unsealed", [][]byte{keyOld}, "p", "r1", now, string(state), "", true},
		{"short", [][]byte{keyOld}, "p", "r1", now, sealMagic + "abc", "", true},
		{"no keys: sealed opened unchecked", nil, "x", "y", now.Add(time.Hour), sealed, string(state), false},
		{"no keys: unsealed as it is", nil, "p", "r1", now, string(state), string(state), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := unseal(tt.keys, tt.pool, tt.replica, tt.at, 30*time.Second, tt.v)
			if tt.err {
				if !errors.Is(err, errUnsigned) {
					t.Errorf("unseal() = %q, %v; want errUnsigned", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("unseal() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// FuzzUnseal: any value read from Redis opens or is refused, never panics.
func FuzzUnseal(f *testing.F) {
	now := time.Unix(1_700_000_000, 0)
	f.Add(string(seal(keyOld, "p", "r", now, []byte("x"))))
	f.Add(sealMagic)
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		for _, keys := range [][][]byte{nil, {keyOld}} {
			got, err := unseal(keys, "p", "r", now, time.Minute, v)
			if err == nil && len(got) > len(v) {
				t.Fatalf("unseal() returned %d bytes from %d", len(got), len(v))
			}
		}
	})
}

// Replicas with the same record keys share their load; a replica without
// them (a writer of Redis with no key: its state is unsigned) is not
// counted and its states are counted as unsigned; a replica that has the
// old key second still reads one that signs with it (a key rotation
// step).
func TestSignedReplicaStates(t *testing.T) {
	addr, _, _ := startRedis(t)
	keys := func(k ...[]byte) func(*RedisOptions) { return func(o *RedisOptions) { o.RecordKeys = k } }
	a := newReplica(t, addr, "a", keys(keyNew, keyOld))
	b := newReplica(t, addr, "b", keys(keyOld))
	forger := newReplica(t, addr, "forger", nil)
	db := b.route(t, testPrompt(1, 4))
	df := forger.route(t, testPrompt(2, 4))
	eventually(t, 10*time.Second, func() string {
		if got := a.remote()[db.Instance]; got.Running < 1 {
			return fmt.Sprintf("a: Remote[%s] = %+v, want b's request running there", db.Instance, got)
		}
		if a.store.Stats().Unsigned == 0 {
			return "a: Stats().Unsigned = 0, want the forger's states counted"
		}
		return ""
	})
	if df.Instance != db.Instance {
		if got := a.remote()[df.Instance]; got.Running != 0 {
			t.Errorf("a: Remote[%s] = %+v, want the forger's request not counted", df.Instance, got)
		}
	} else if got := a.remote()[db.Instance]; got.Running != 1 {
		t.Errorf("a: Remote[%s] = %+v, want b's one request, not the forger's", db.Instance, got)
	}
	// The replica without keys reads signed states unchecked: it still
	// sees both.
	eventually(t, 10*time.Second, func() string {
		if got := forger.remote()[db.Instance]; got.Running < 1 {
			return fmt.Sprintf("forger: Remote[%s] = %+v, want b's request (signed states read unchecked)", db.Instance, got)
		}
		return ""
	})
	// b has only the old key, a signs with the new one: b refuses a's
	// states. Once the forger (which reads everything) sees a's request,
	// a's state holding it is in Redis; two more refusals by b later, b
	// has read it at least once.
	da := a.route(t, testPrompt(3, 4))
	eventually(t, 10*time.Second, func() string {
		if got := forger.remote()[da.Instance]; got.Running < 1 {
			return fmt.Sprintf("forger: Remote[%s] = %+v, want a's request", da.Instance, got)
		}
		return ""
	})
	u0 := b.store.Stats().Unsigned
	eventually(t, 10*time.Second, func() string {
		if u := b.store.Stats().Unsigned; u < u0+2 {
			return fmt.Sprintf("b: Stats().Unsigned = %d, want at least %d (a's and the forger's states refused)", u, u0+2)
		}
		return ""
	})
	if got := b.remote()[da.Instance]; got.Running != 0 {
		t.Errorf("b: Remote[%s] = %+v, want a's request not counted (a signs with a key b lacks)", da.Instance, got)
	}
}

func TestRecordKeysValidated(t *testing.T) {
	for _, tt := range []struct {
		name string
		keys [][]byte
	}{
		{"short key", [][]byte{[]byte("short")}},
		{"too many", [][]byte{keyOld, keyNew, keyOld, keyNew, keyOld}},
	} {
		if _, err := NewRedis(RedisOptions{Addrs: []string{"127.0.0.1:1"}, RecordKeys: tt.keys}); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: NewRedis() error = %v, want ErrInvalidOptions", tt.name, err)
		}
	}
}
