package trace

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Write writes t to w in the Mooncake JSON Lines format, one request per
// line in the order of t.Requests:
//
//	{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}
//
// The timestamp is Arrival in milliseconds, an integer when whole and an
// exact decimal fraction otherwise, so that Read gives back the same
// Arrival. Every request is checked before anything is written: an Arrival
// < 0, InputTokens < 1, OutputTokens < 0 or empty Blocks fails with
// ErrInvalidRequest. Write does not check len(Blocks) against InputTokens:
// a trace that breaks len(Blocks) == ceil(InputTokens/BlockSize) reads back
// only with FormatGeneric.
func Write(w io.Writer, t *Trace) error {
	if t == nil {
		return fmt.Errorf("trace: Write: %w: nil trace", ErrInvalidArgument)
	}
	for i, r := range t.Requests {
		var what string
		switch {
		case r.Arrival < 0:
			what = fmt.Sprintf("arrival %v is negative", r.Arrival)
		case r.InputTokens < 1:
			what = fmt.Sprintf("input tokens must be >= 1, got %d", r.InputTokens)
		case r.OutputTokens < 0:
			what = fmt.Sprintf("output tokens must be >= 0, got %d", r.OutputTokens)
		case len(r.Blocks) == 0:
			what = "no blocks"
		case r.SLO < 0:
			what = fmt.Sprintf("SLO %v is negative", r.SLO)
		default:
			continue
		}
		return fmt.Errorf("trace: Write: request %d: %w: %s", i, ErrInvalidRequest, what)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var buf []byte
	for _, r := range t.Requests {
		buf = appendRecord(buf[:0], r)
		if _, err := bw.Write(buf); err != nil {
			return fmt.Errorf("trace: Write: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("trace: Write: %w", err)
	}
	return nil
}

func appendRecord(b []byte, r Request) []byte {
	b = append(b, `{"timestamp": `...)
	b = appendMillis(b, r.Arrival)
	b = append(b, `, "input_length": `...)
	b = strconv.AppendInt(b, int64(r.InputTokens), 10)
	b = append(b, `, "output_length": `...)
	b = strconv.AppendInt(b, int64(r.OutputTokens), 10)
	b = append(b, `, "hash_ids": [`...)
	for j, id := range r.Blocks {
		if j > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendUint(b, id, 10)
	}
	b = append(b, ']')
	if r.SLO > 0 {
		b = append(b, `, "slo_ms": `...)
		b = appendMillis(b, r.SLO)
	}
	return append(b, "}\n"...)
}

// appendMillis appends d >= 0 in milliseconds: an integer when whole,
// otherwise with up to 6 exact decimals.
func appendMillis(b []byte, d time.Duration) []byte {
	ms, ns := int64(d/time.Millisecond), int64(d%time.Millisecond)
	b = strconv.AppendInt(b, ms, 10)
	if ns == 0 {
		return b
	}
	frac := strconv.AppendInt(nil, ns+1_000_000, 10)[1:] // zero-padded to 6 digits
	for frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	b = append(b, '.')
	return append(b, frac...)
}
