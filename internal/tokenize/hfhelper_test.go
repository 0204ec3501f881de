//go:build tokenizers && cgo

package tokenize

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// llamaFile returns the path of Meta-Llama-3-8B-Instruct.json from the
// github.com/daulet/tokenizers module's test data (or $TOKENIZE_TEST_FILE),
// skipping the test when it cannot be found.
func llamaFile(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("TOKENIZE_TEST_FILE"); p != "" {
		return p
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		tb.Skipf("skipping: cannot run `go env GOMODCACHE` to find the test tokenizer: %v", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)),
		"github.com/daulet/tokenizers@v1.22.1/test/data/Meta-Llama-3-8B-Instruct.json")
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("skipping: test tokenizer not found (run `go mod download github.com/daulet/tokenizers@v1.22.1` or set TOKENIZE_TEST_FILE): %v", err)
	}
	return p
}

// openLlama opens the Llama 3 tokenizer, closed when the test ends.
func openLlama(tb testing.TB) Encoder {
	tb.Helper()
	enc, err := Open(llamaFile(tb))
	if err != nil {
		tb.Fatalf("Open() error = %v", err)
	}
	tb.Cleanup(func() {
		if err := enc.Close(); err != nil {
			tb.Errorf("Close() error = %v", err)
		}
	})
	return enc
}

// testEncoders returns the Llama 3 tokenizer.
func testEncoders(tb testing.TB) []Encoder { return []Encoder{openLlama(tb)} }
