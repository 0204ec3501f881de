package tokenize

// Encoder turns text into token ids. Implementations must be safe for
// concurrent use.
type Encoder interface {
	// Encode appends the token ids of text to dst and returns the extended
	// slice. It adds no special tokens (no BOS/EOS). It must not panic on
	// any input, invalid UTF-8 included.
	Encode(text string, dst []uint32) []uint32
	// Name identifies the encoder: "bytes", or the tokenizer file's base name.
	Name() string
	// Close releases the encoder's resources. Encode after Close may
	// append nothing.
	Close() error
}

// Open returns the Hugging Face tokenizer described by the tokenizer.json
// file at path, or the byte approximation (Bytes) when path is "".
//
// Real tokenizers need cgo and the Rust library libtokenizers.a, so they are
// compiled in only with the "tokenizers" build tag. In a build without it a
// non-empty path returns an error, wrapping errors.ErrUnsupported, that says
// how to build with real tokenizers (make libtokenizers, then build with
// -tags tokenizers).
func Open(path string) (Encoder, error) {
	if path == "" {
		return Bytes(), nil
	}
	return openHF(path)
}
