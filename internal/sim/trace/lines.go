package trace

import (
	"bufio"
	"errors"
	"io"
)

// lineReader splits a stream into lines of bounded length. Unlike
// bufio.Scanner it has no fixed token limit: a line may be as long as max,
// and a longer one is reported and skipped without being kept in memory.
type lineReader struct {
	br  *bufio.Reader
	buf []byte
	max int
	n   int // number of the last line returned, 1-based
}

// newLineReader reads r through a buffer of bufSize bytes (at least 16).
func newLineReader(r io.Reader, max, bufSize int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, bufSize), max: max}
}

// next returns the next line without its terminator ("\n" or "\r\n"); the
// slice is valid until the following call. tooLong reports a line of more
// than max bytes, whose content is discarded (line is then nil). At the end
// of the input next returns io.EOF; other read errors are returned as they
// are.
func (lr *lineReader) next() (line []byte, tooLong bool, err error) {
	lr.buf = lr.buf[:0]
	seen := 0
	for {
		chunk, err := lr.br.ReadSlice('\n')
		seen += len(chunk)
		complete := err == nil || errors.Is(err, io.EOF)
		if err != nil && !complete && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, false, err
		}
		if errors.Is(err, io.EOF) && seen == 0 {
			return nil, false, io.EOF
		}
		if !tooLong {
			if complete && len(lr.buf) == 0 {
				line = chunk // the whole line is in the reader's buffer
			} else {
				lr.buf = append(lr.buf, chunk...)
				line = lr.buf
			}
			// The terminator takes at most 2 bytes.
			if len(line) > lr.max+2 {
				tooLong, line, lr.buf = true, nil, lr.buf[:0]
			}
		}
		if complete {
			break
		}
	}
	lr.n++
	if tooLong {
		return nil, true, nil
	}
	line = trimEOL(line)
	if len(line) > lr.max {
		return nil, true, nil
	}
	return line, false, nil
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// isBlank reports whether b holds only JSON whitespace.
func isBlank(b []byte) bool {
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
