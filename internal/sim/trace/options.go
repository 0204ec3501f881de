package trace

import "fmt"

// Format names an input format of Read.
type Format string

// The formats Read understands; see the package documentation.
const (
	FormatMooncake Format = "mooncake"
	FormatGeneric  Format = "generic"
)

// DefaultMaxLineBytes is the default cap on the length of one input line.
const DefaultMaxLineBytes = 64 << 20

// Options control Read and ReadFile. The zero value reads the Mooncake
// format with 512-token blocks.
type Options struct {
	// Format is FormatMooncake (default when empty) or FormatGeneric.
	Format Format
	// BlockSize is the number of tokens per block; 0 means 512.
	BlockSize int
	// TimeUnit is the unit of generic timestamps: "s", "ms", "us" or "ns";
	// empty means "ms". The Mooncake format is always in ms, and any other
	// unit is rejected for it.
	TimeUnit string
	// ChainIDs, for the generic format only, says that hash_ids are
	// per-block content ids rather than chained hashes: the reader chains
	// them so that equal values mean equal prefixes (see chainIDs).
	ChainIDs bool
	// SkipMalformed skips malformed lines, counting them in Trace.Skipped,
	// instead of failing on the first one.
	SkipMalformed bool
	// Limit, if > 0, stops reading once Limit requests have been read (in
	// input order, before sorting by arrival). 0 reads all.
	Limit int
	// MaxLineBytes caps the length of one line, terminator excluded; 0
	// means DefaultMaxLineBytes (64 MiB). A longer line is malformed.
	MaxLineBytes int
}

// unitExp returns the power of ten of nanoseconds in TimeUnit u.
func unitExp(u string) (int, bool) {
	switch u {
	case "s":
		return 9, true
	case "ms":
		return 6, true
	case "us":
		return 3, true
	case "ns":
		return 0, true
	}
	return 0, false
}

// resolve returns o with defaults filled in, or an error wrapping
// ErrInvalidOptions that names the offending field.
func (o Options) resolve() (Options, error) {
	if o.Format == "" {
		o.Format = FormatMooncake
	}
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.MaxLineBytes == 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	bad := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("trace: %w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch o.Format {
	case FormatMooncake:
		if o.TimeUnit != "" && o.TimeUnit != "ms" {
			return bad("TimeUnit %q: the mooncake format is always in ms (use Format generic)", o.TimeUnit)
		}
		if o.ChainIDs {
			return bad("ChainIDs: mooncake hash_ids are already chained (use Format generic)")
		}
	case FormatGeneric:
	default:
		return bad("Format %q unknown (want %q or %q)", o.Format, FormatMooncake, FormatGeneric)
	}
	if o.TimeUnit == "" {
		o.TimeUnit = "ms"
	}
	if _, ok := unitExp(o.TimeUnit); !ok {
		return bad("TimeUnit %q unknown (want s, ms, us or ns)", o.TimeUnit)
	}
	if o.BlockSize < 0 {
		return bad("BlockSize must be >= 1, got %d", o.BlockSize)
	}
	if o.Limit < 0 {
		return bad("Limit must be >= 0, got %d", o.Limit)
	}
	if o.MaxLineBytes < 0 {
		return bad("MaxLineBytes must be >= 0, got %d", o.MaxLineBytes)
	}
	return o, nil
}
