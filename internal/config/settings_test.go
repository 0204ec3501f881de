package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// settingValues are valid values, as a user writes them, for the settings
// whose type alone does not give one.
var settingValues = map[string]string{
	"order": "cache", "late": "serve",
	"split": "2", "merge": "0.25", "candidates": "3", "learn": "0.2",
}

// TestSchedulerSettingsTable: every row reaches a field of its own of a
// supported type, names are unique, every YAML key exists in the file's
// reference, and a row with both a file key and a simulator key sets the
// same field to the same value from either.
func TestSchedulerSettingsTable(t *testing.T) {
	ref, err := configReference()
	if err != nil {
		t.Fatal(err)
	}
	keys, flags, yamls := map[string]bool{}, map[string]bool{}, map[string]bool{}
	fields := map[uintptr]string{}
	for _, st := range SchedulerSettings() {
		name := st.Key + st.YAML
		t.Run(name, func(t *testing.T) {
			if st.Key == "" && st.YAML == "" {
				t.Fatal("a row with neither a key nor a YAML key")
			}
			if st.Key != "" && (keys[st.Key] || flags[st.Flag()]) {
				t.Errorf("key %s twice", st.Key)
			}
			if st.Key != "" && st.Help == "" {
				t.Errorf("key %s has no help for its flag", st.Key)
			}
			if st.YAML != "" && yamls[st.YAML] {
				t.Errorf("YAML key %s twice", st.YAML)
			}
			keys[st.Key], flags[st.Flag()], yamls[st.YAML] = true, true, true
			var s scheduler.Config
			p := reflect.ValueOf(st.field(&s))
			if p.Kind() != reflect.Pointer {
				t.Fatalf("field() = %T, want a pointer", st.field(&s))
			}
			if other, dup := fields[p.Pointer()]; dup {
				t.Errorf("field shared with %s", other)
			}
			fields[p.Pointer()] = name
			if st.YAML != "" && !strings.Contains(string(ref), "`"+st.YAML+"`") {
				t.Errorf("YAML key %s is not in docs/configuration.md's reference", st.YAML)
			}
			if st.Key == "" || st.YAML == "" {
				return
			}
			v := settingValues[st.Key]
			if v == "" {
				switch p.Elem().Interface().(type) {
				case int:
					v = "7"
				case float64:
					v = "0.25"
				case time.Duration:
					v = "3s"
				}
			}
			var fromKey scheduler.Config
			if err := st.Set(&fromKey, v); err != nil {
				t.Fatalf("Set(%q) error = %v", v, err)
			}
			c := mustParse(t, st.YAML, v)
			fromFile := c.SchedulerConfig(c.Pools[0])
			got := reflect.ValueOf(st.field(&fromFile)).Elem().Interface()
			want := reflect.ValueOf(st.field(&fromKey)).Elem().Interface()
			if got != want {
				t.Errorf("%s: %v from the file, %v from the key %s=%s", st.YAML, got, want, st.Key, v)
			}
		})
	}
}

// mustParse parses a minimal file with yamlKey set to v.
func mustParse(t *testing.T, yamlKey, v string) Config {
	t.Helper()
	const pool = "pools:\n  - instances: [{address: 10.0.0.1:80}]\n"
	var doc string
	if k, ok := strings.CutPrefix(yamlKey, "pools[]."); ok {
		doc = pool + "    " + k + ": " + v + "\n"
	} else {
		section, k, _ := strings.Cut(yamlKey, ".")
		doc = pool + section + ": {" + k + ": " + v + "}\n"
	}
	c, err := Parse([]byte(doc), nil)
	if err != nil {
		t.Fatalf("Parse(%q) error = %v", doc, err)
	}
	return c
}

func TestSchedulerSettingSet(t *testing.T) {
	tests := []struct {
		key, v  string
		want    any
		wantErr string
	}{
		{"max_running", "64", 64, ""},
		{"max_running", "-1", -1, ""},
		{"max_running", "6.5", nil, `"6.5" is not an integer`},
		{"split", "1.5", 1.5, ""},
		{"split", "x", nil, `"x" is not a number`},
		{"order", "cache", "cache", ""},
		{"oldest_wait", "2", 2 * time.Second, ""},
		{"oldest_wait", "1.5", 1500 * time.Millisecond, ""},
		{"oldest_wait", "750ms", 750 * time.Millisecond, ""},
		{"max_queue_wait", "1m", time.Minute, ""},
		{"oldest_wait", "soon", nil, "is not a duration"},
		{"oldest_wait", "NaN", nil, "is not a duration"},
		{"oldest_wait", "1e300", nil, "is not a duration"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s=%s", tt.key, tt.v), func(t *testing.T) {
			st, ok := LookupSchedulerSetting(tt.key)
			if !ok {
				t.Fatalf("LookupSchedulerSetting(%q) not found", tt.key)
			}
			var s scheduler.Config
			err := st.Set(&s, tt.v)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Set(%q) error = %v, want %q", tt.v, err, tt.wantErr)
				}
				return
			}
			if got := reflect.ValueOf(st.field(&s)).Elem().Interface(); err != nil || got != tt.want {
				t.Errorf("Set(%q) = %v, %v; want %v", tt.v, got, err, tt.want)
			}
		})
	}
	if _, ok := LookupSchedulerSetting(""); ok {
		t.Error(`LookupSchedulerSetting("") found a row`)
	}
	if _, ok := LookupSchedulerSetting("headroom"); ok {
		t.Error(`LookupSchedulerSetting("headroom") found a row: policy parameters are not scheduler settings`)
	}
}
