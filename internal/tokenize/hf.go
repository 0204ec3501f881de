//go:build tokenizers && cgo

package tokenize

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/daulet/tokenizers"
)

// hfEncoder wraps a Hugging Face tokenizer (Rust, through cgo). The lock
// lets Close wait for Encode calls in flight; Encode after Close appends
// nothing.
type hfEncoder struct {
	name string
	mu   sync.RWMutex
	tk   *tokenizers.Tokenizer // nil once closed
}

func openHF(path string) (Encoder, error) {
	tk, err := tokenizers.FromFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenize: open %s: %w", path, err)
	}
	return &hfEncoder{name: filepath.Base(path), tk: tk}, nil
}

func (e *hfEncoder) Name() string { return e.name }

// Encode appends text's ids, without special tokens. Invalid UTF-8 is
// replaced by U+FFFD on the Rust side. The text crosses to C as a
// NUL-terminated string, so a text holding NUL bytes is encoded piece by
// piece between them and the NULs themselves add no token.
func (e *hfEncoder) Encode(text string, dst []uint32) []uint32 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.tk == nil {
		return dst
	}
	for {
		piece, rest, found := strings.Cut(text, "\x00")
		if piece != "" {
			dst = append(dst, e.tk.EncodeWithOptions(piece, false).IDs...)
		}
		if !found {
			return dst
		}
		text = rest
	}
}

func (e *hfEncoder) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tk != nil {
		err := e.tk.Close()
		e.tk = nil
		return err
	}
	return nil
}
