package trace

import (
	"math"
	"strings"
)

// plainUint parses b if it is a plain run of ASCII digits whose value fits
// in a uint64: the common case of a JSON integer, parsed without allocating.
func plainUint[T ~string | ~[]byte](b T) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// maxExp bounds the exponent kept by parseDecimal: far beyond any value that
// fits in 64 bits, and small enough never to overflow an int.
const maxExp = 1 << 30

// decimal is an exactly parsed JSON number: (-1)^neg × digits × 10^exp.
type decimal struct {
	neg    bool
	digits string // significant digits, no leading or trailing zeros; "" is zero
	exp    int
}

// parseDecimal parses s, which must follow the JSON number grammar exactly.
// It never rounds: 0.1 is {digits "1", exp -1}.
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return decimal{}, false
	}
	intPart := s[start:i]
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == fs {
			return decimal{}, false
		}
		frac = s[fs:i]
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		es := i
		for i < len(s) && isDigit(s[i]) {
			if exp < maxExp {
				exp = exp*10 + int(s[i]-'0')
			}
			i++
		}
		if i == es {
			return decimal{}, false
		}
		exp = min(exp, maxExp)
		if neg {
			exp = -exp
		}
	}
	if i != len(s) {
		return decimal{}, false
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	sig := strings.TrimRight(digits, "0")
	d.digits = sig
	if sig != "" {
		d.exp = exp - len(frac) + len(digits) - len(sig)
	}
	return d, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isZero reports whether d is zero (possibly written -0).
func (d decimal) isZero() bool { return d.digits == "" }

// round returns the magnitude of d × 10^shift rounded to the nearest
// integer, halves away from zero; exact reports that no rounding happened,
// ok that the magnitude fits in a uint64.
func (d decimal) round(shift int) (mag uint64, exact, ok bool) {
	if d.isZero() {
		return 0, true, true
	}
	e := d.exp + shift
	n := len(d.digits)
	if e >= 0 {
		if n+e > 20 {
			return 0, true, false
		}
		v, ok := plainUint(d.digits)
		for ; ok && e > 0; e-- {
			if v > math.MaxUint64/10 {
				ok = false
			}
			v *= 10
		}
		return v, true, ok
	}
	k := -e // digits after the decimal point; the last one is non-zero
	if k > n {
		return 0, false, true
	}
	var v uint64
	if k < n {
		if v, ok = plainUint(d.digits[:n-k]); !ok {
			return 0, false, false
		}
	}
	if d.digits[n-k] >= '5' {
		if v == math.MaxUint64 {
			return 0, false, false
		}
		v++
	}
	return v, false, true
}
