package httpengine

import (
	"strconv"
	"strings"
)

// piece returns the text of output token i (from 0): "token<i>", after a
// space unless it is the first. The output of n tokens is pieces 0..n-1
// concatenated: "token0 token1 ...".
func piece(i int) string {
	if i == 0 {
		return "token0"
	}
	return " token" + strconv.Itoa(i)
}

// output returns the whole text of n output tokens.
func output(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(piece(i))
	}
	return b.String()
}
