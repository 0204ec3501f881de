package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// record holds the fields of one line, undecoded. Unknown fields are
// ignored. A missing field leaves its RawMessage empty.
type record struct {
	Timestamp    json.RawMessage `json:"timestamp"`
	InputLength  json.RawMessage `json:"input_length"`
	OutputLength json.RawMessage `json:"output_length"`
	HashIDs      json.RawMessage `json:"hash_ids"`
	SLO          json.RawMessage `json:"slo_ms"` // optional
}

// decoder turns lines into Requests. It reuses its buffers between lines
// and is not safe for concurrent use.
type decoder struct {
	opt     Options // resolved
	unitExp int     // power of ten of nanoseconds per timestamp unit
	unit    uint64  // nanoseconds per timestamp unit
	rec     record
	ids     []uint64
	elems   []json.RawMessage
}

func newDecoder(opt Options) *decoder {
	exp, _ := unitExp(opt.TimeUnit)
	return &decoder{opt: opt, unitExp: exp, unit: pow10(exp)}
}

// decode parses one non-blank line. Its errors say what is wrong with the
// line, without position; the caller adds it.
func (d *decoder) decode(line []byte) (Request, error) {
	d.rec.Timestamp = d.rec.Timestamp[:0]
	d.rec.InputLength = d.rec.InputLength[:0]
	d.rec.OutputLength = d.rec.OutputLength[:0]
	d.rec.HashIDs = d.rec.HashIDs[:0]
	d.rec.SLO = d.rec.SLO[:0]
	if err := json.Unmarshal(line, &d.rec); err != nil {
		return Request{}, describeJSONError(err)
	}
	arrival, err := d.timestamp(d.rec.Timestamp)
	if err != nil {
		return Request{}, err
	}
	in, err := intField("input_length", d.rec.InputLength, 1)
	if err != nil {
		return Request{}, err
	}
	out, err := intField("output_length", d.rec.OutputLength, 0)
	if err != nil {
		return Request{}, err
	}
	ids, err := d.hashIDs(d.rec.HashIDs)
	if err != nil {
		return Request{}, err
	}
	if d.opt.Format == FormatMooncake {
		bs := d.opt.BlockSize
		want := in / bs
		if in%bs != 0 {
			want++
		}
		if len(ids) != want {
			return Request{}, fmt.Errorf("hash_ids has %d ids, want ceil(input_length %d / block size %d) = %d",
				len(ids), in, bs, want)
		}
	}
	slo, err := sloField(d.rec.SLO)
	if err != nil {
		return Request{}, err
	}
	blocks := slices.Clone(ids)
	if d.opt.ChainIDs {
		chainIDs(blocks)
	}
	return Request{Arrival: arrival, InputTokens: in, OutputTokens: out, Blocks: blocks, SLO: slo}, nil
}

func describeJSONError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("invalid JSON at offset %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ) && typ.Field == "":
		return fmt.Errorf("want a JSON object, got %s", typ.Value)
	}
	return fmt.Errorf("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// kind names the JSON type of a valid raw value.
func kind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// excerpt quotes raw for an error message, shortened if long.
func excerpt[T ~string | ~[]byte](raw T) string {
	const max = 40
	s := string(raw)
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// timestamp parses the timestamp field into a non-negative duration.
func (d *decoder) timestamp(raw []byte) (time.Duration, error) {
	const name = "timestamp"
	if len(raw) == 0 {
		return 0, fmt.Errorf("missing field %s", name)
	}
	lit := string(raw)
	switch k := kind(raw); {
	case k == "string" && d.opt.Format == FormatGeneric:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("%s: %v", name, err)
		}
		lit = strings.TrimSpace(s)
		if _, ok := parseDecimal(lit); !ok {
			return 0, fmt.Errorf("%s: string %s does not hold a number", name, excerpt(raw))
		}
	case k == "string":
		return 0, fmt.Errorf("%s: want number, got string %s (string timestamps need Format generic)", name, excerpt(raw))
	case k != "number":
		return 0, fmt.Errorf("%s: want number, got %s", name, k)
	default:
		if v, ok := plainUint(raw); ok && v <= math.MaxInt64/d.unit {
			return time.Duration(v * d.unit), nil
		}
	}
	dec, _ := parseDecimal(lit) // valid: checked above or by encoding/json
	if dec.neg && !dec.isZero() {
		return 0, fmt.Errorf("%s must be >= 0, got %s", name, excerpt(lit))
	}
	mag, _, ok := dec.round(d.unitExp)
	if !ok || mag > math.MaxInt64 {
		return 0, fmt.Errorf("%s %s %s is out of range", name, excerpt(lit), d.opt.TimeUnit)
	}
	return time.Duration(mag), nil
}

func pow10(e int) uint64 {
	p := uint64(1)
	for range e {
		p *= 10
	}
	return p
}

// intField parses raw, the value of field name, as an integer >= min.
// Integral numbers in any JSON notation (7, 7.0, 0.7e1) are accepted.
func intField(name string, raw []byte, min int) (int, error) {
	if len(raw) == 0 {
		return 0, fmt.Errorf("missing field %s", name)
	}
	if k := kind(raw); k != "number" {
		if k == "string" {
			return 0, fmt.Errorf("%s: want integer, got string %s", name, excerpt(raw))
		}
		return 0, fmt.Errorf("%s: want integer, got %s", name, k)
	}
	if v, ok := plainUint(raw); ok && v <= math.MaxInt {
		if int(v) < min {
			return 0, fmt.Errorf("%s must be >= %d, got %s", name, min, raw)
		}
		return int(v), nil
	}
	dec, _ := parseDecimal(string(raw))
	mag, exact, ok := dec.round(0)
	switch {
	case !exact:
		return 0, fmt.Errorf("%s: %s is not an integer", name, excerpt(raw))
	case dec.neg && !dec.isZero():
		return 0, fmt.Errorf("%s must be >= %d, got %s", name, min, excerpt(raw))
	case !ok || mag > math.MaxInt:
		return 0, fmt.Errorf("%s: %s is out of range", name, excerpt(raw))
	case int(mag) < min:
		return 0, fmt.Errorf("%s must be >= %d, got %s", name, min, excerpt(raw))
	}
	return int(mag), nil
}

// hashIDs parses the hash_ids field: a non-empty array of integers in
// [0, 2^64). The result aliases d.ids and is valid until the next call.
func (d *decoder) hashIDs(raw []byte) ([]uint64, error) {
	const name = "hash_ids"
	if len(raw) == 0 {
		return nil, fmt.Errorf("missing field %s", name)
	}
	if k := kind(raw); k != "array" {
		return nil, fmt.Errorf("%s: want array, got %s", name, k)
	}
	ids, ok := scanIDs(raw, d.ids[:0])
	if !ok {
		var err error
		if ids, err = d.slowIDs(raw, ids[:0]); err != nil {
			return nil, err
		}
	}
	d.ids = ids
	if len(ids) == 0 {
		return nil, fmt.Errorf("%s is empty", name)
	}
	return ids, nil
}

// scanIDs is the fast path of hashIDs: it appends the elements of raw, a
// valid JSON array, to dst if all are plain integers that fit in a uint64,
// and reports false otherwise.
func scanIDs(raw []byte, dst []uint64) ([]uint64, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return dst, false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return dst, true
	}
	for {
		var v uint64
		start := i
		for ; i < len(raw) && isDigit(raw[i]); i++ {
			c := uint64(raw[i] - '0')
			if v > (math.MaxUint64-c)/10 {
				return dst, false
			}
			v = v*10 + c
		}
		if i == start {
			return dst, false
		}
		dst = append(dst, v)
		if i = skipSpace(raw, i); i >= len(raw) {
			return dst, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case ']':
			return dst, true
		default: // fraction or exponent
			return dst, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// slowIDs parses the elements of raw one by one, accepting integral numbers
// in any notation and naming the first bad element.
func (d *decoder) slowIDs(raw []byte, dst []uint64) ([]uint64, error) {
	d.elems = d.elems[:0]
	if err := json.Unmarshal(raw, &d.elems); err != nil {
		return dst, fmt.Errorf("hash_ids: %v", err)
	}
	for i, e := range d.elems {
		if k := kind(e); k != "number" {
			if k == "string" {
				return dst, fmt.Errorf("hash_ids[%d]: want integer, got string %s", i, excerpt(e))
			}
			return dst, fmt.Errorf("hash_ids[%d]: want integer, got %s", i, k)
		}
		dec, _ := parseDecimal(string(e))
		mag, exact, ok := dec.round(0)
		switch {
		case !exact:
			return dst, fmt.Errorf("hash_ids[%d]: %s is not an integer", i, excerpt(e))
		case dec.neg && !dec.isZero():
			return dst, fmt.Errorf("hash_ids[%d] must be >= 0, got %s", i, excerpt(e))
		case !ok:
			return dst, fmt.Errorf("hash_ids[%d]: %s does not fit in 64 bits", i, excerpt(e))
		}
		dst = append(dst, mag)
	}
	return dst, nil
}

// maxSLOMillis bounds the optional slo_ms field: about 11.6 days.
const maxSLOMillis = 1e9

// sloField decodes the optional slo_ms field: absent or null is 0 (the
// simulator's default SLO), otherwise a number of milliseconds in
// (0, maxSLOMillis].
func sloField(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || !(f > 0) || f > maxSLOMillis {
		return 0, fmt.Errorf("slo_ms must be a number of milliseconds in (0, %g], got %.40s", float64(maxSLOMillis), raw)
	}
	return time.Duration(math.Round(f * float64(time.Millisecond))), nil
}
