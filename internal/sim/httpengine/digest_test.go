package httpengine

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
)

// Inference answers carry the digest and length of the body the engine
// read, whether they succeed or not.
func TestBodyDigestHeaders(t *testing.T) {
	_, url := start(t, fast())
	for _, body := range []string{chatBody(strings.Repeat("digest me ", 500), ""), chatBody("", `,"max_tokens":-1`)} {
		a := do(t, "POST", url+"/v1/chat/completions", body)
		sum := sha256.Sum256([]byte(body))
		if got := a.header.Get(HeaderBodyDigest); got != hex.EncodeToString(sum[:]) {
			t.Errorf("status %d: %s = %q, want %x", a.status, HeaderBodyDigest, got, sum)
		}
		if got := a.header.Get(HeaderBodyBytes); got != strconv.Itoa(len(body)) {
			t.Errorf("status %d: %s = %q, want %d", a.status, HeaderBodyBytes, got, len(body))
		}
	}
}
