package openai

import (
	"strconv"
	"strings"

	"github.com/dualmap/dualmap/internal/hashing"
)

// marker is the text that stands for a non-text content part of type typ
// whose canonical JSON is part: <typ:hash> with its hashing.FNV1a in 16
// hex digits.
func marker(typ string, part []byte) string {
	h := strconv.FormatUint(hashing.FNV1a(part), 16)
	return "<" + typ + ":" + strings.Repeat("0", 16-len(h)) + h + ">"
}
