//go:build !tokenizers || !cgo

package tokenize

import (
	"errors"
	"fmt"
)

// openHF reports that this build has no real tokenizers.
func openHF(path string) (Encoder, error) {
	return nil, fmt.Errorf("tokenize: open %s: real tokenizers are not compiled into this build; "+
		"build libtokenizers.a with `make libtokenizers`, then build with "+
		"CGO_ENABLED=1 CGO_LDFLAGS=\"-L<dir it prints>\" go build -tags tokenizers "+
		"(or leave the tokenizer path empty for the byte approximation): %w", path, errors.ErrUnsupported)
}
