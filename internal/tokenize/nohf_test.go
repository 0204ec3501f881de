//go:build !tokenizers || !cgo

package tokenize

import (
	"errors"
	"strings"
	"testing"
)

// testEncoders returns no real tokenizers: this build has none.
func testEncoders(testing.TB) []Encoder { return nil }

func TestOpenWithoutTokenizers(t *testing.T) {
	_, err := Open("tokenizer.json")
	if err == nil {
		t.Fatal(`Open("tokenizer.json") error = nil, want an error in a build without -tags tokenizers`)
	}
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Open() error = %v, want one wrapping errors.ErrUnsupported", err)
	}
	for _, want := range []string{"tokenize: ", "make libtokenizers", "-tags tokenizers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open() error = %q, want it to contain %q", err, want)
		}
	}
}
