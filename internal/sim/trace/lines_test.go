package trace

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestLineReader compares lineReader with a plain split for lines around
// the buffer size and the length cap, including "\r\n" split across reads.
func TestLineReader(t *testing.T) {
	lines := []string{"", "a", "\r", strings.Repeat("x", 15), strings.Repeat("y", 16) + "\r",
		strings.Repeat("z", 17), strings.Repeat("w", 40) + "\r", strings.Repeat("v", 100)}
	input := strings.Join(lines, "\n")
	for _, bufSize := range []int{16, 17, 31, 64, 4096} {
		for _, max := range []int{0, 1, 15, 16, 17, 40, 41, 1000} {
			lr := newLineReader(strings.NewReader(input), max, bufSize)
			for i, want := range lines {
				want = strings.TrimSuffix(want, "\r")
				got, tooLong, err := lr.next()
				if err != nil {
					t.Fatalf("buf %d max %d: next() line %d error = %v", bufSize, max, i+1, err)
				}
				if wantLong := len(want) > max; tooLong != wantLong || (!tooLong && string(got) != want) || lr.n != i+1 {
					t.Fatalf("buf %d max %d: next() = %q, %v at line %d, want %q, %v at line %d",
						bufSize, max, got, tooLong, lr.n, want, wantLong, i+1)
				}
			}
			if _, _, err := lr.next(); !errors.Is(err, io.EOF) {
				t.Fatalf("buf %d max %d: next() at end error = %v, want io.EOF", bufSize, max, err)
			}
		}
	}
}

func TestIsBlank(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{{"", true}, {" \t\r", true}, {"\v", false}, {" x ", false}}
	for _, tt := range tests {
		if got := isBlank([]byte(tt.in)); got != tt.want {
			t.Errorf("isBlank(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
