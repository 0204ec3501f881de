package config

import (
	"errors"
	"strings"
	"testing"
)

func TestStreamBoundsDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxStreams != DefaultMaxStreams || c.Limits.MaxBufferedBytes != DefaultMaxBufferedBytes {
		t.Errorf("Parse(minimal) limits = %+v, want max_streams %d, max_buffered_bytes %d",
			c.Limits, DefaultMaxStreams, DefaultMaxBufferedBytes)
	}
	c, err = Parse([]byte(minimal+"limits: {max_streams: 20, max_body_bytes: 1000, max_buffered_bytes: 1000}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxStreams != 20 || c.Limits.MaxBufferedBytes != 1000 {
		t.Errorf("Parse() limits = %+v, want max_streams 20, max_buffered_bytes 1000", c.Limits)
	}
}

func TestStreamBoundsErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name, yaml, key string
	}{
		{"negative max streams", minimal + "limits: {max_streams: -1}\n", "limits.max_streams"},
		{"negative buffered bytes", minimal + "limits: {max_buffered_bytes: -1}\n", "limits.max_buffered_bytes"},
		{"buffer below one body", minimal + "limits: {max_body_bytes: 2000, max_buffered_bytes: 1999}\n", "limits.max_buffered_bytes"},
		{"buffer below the default body limit", minimal + "limits: {max_buffered_bytes: 1024}\n", "limits.max_buffered_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), nil)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.key) {
				t.Errorf("Parse() error = %v, want ErrInvalid naming %q", err, tt.key)
			}
		})
	}
}
