package replay

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// sseReader splits a text/event-stream body into the data of its events,
// following the server-sent events format: lines end with LF or CRLF, a
// blank line ends an event, "data:" lines (one optional space after the
// colon) add a line of data, lines starting with ':' are comments and other
// fields (event, id, retry) are ignored. Events without data lines are
// skipped. It reads as the bytes arrive, however the server splits them.
type sseReader struct {
	br   *bufio.Reader
	data []byte // the event being read
	has  bool   // whether it has a data line
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 16<<10)}
}

// next returns the data of the next event, its lines joined by "\n". The
// slice is valid until the next call. At the end of the body it returns
// io.EOF; a last event not followed by a blank line is still returned
// first (leniently: the format would drop it). Other errors are the body's.
func (s *sseReader) next() ([]byte, error) {
	s.data, s.has = s.data[:0], false
	for {
		line, err := s.br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		eof := err != nil
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) == 0 {
			if s.has {
				return s.data, nil
			}
			if eof {
				return nil, io.EOF
			}
			continue
		}
		s.field(line)
		if eof {
			if s.has {
				return s.data, nil
			}
			return nil, io.EOF
		}
	}
}

// field handles one non-blank line.
func (s *sseReader) field(line []byte) {
	name, value, found := bytes.Cut(line, []byte(":"))
	if len(name) == 0 || string(name) != "data" {
		return // comment or another field
	}
	if found {
		value = bytes.TrimPrefix(value, []byte(" "))
	}
	if s.has {
		s.data = append(s.data, '\n')
	}
	s.data = append(s.data, value...)
	s.has = true
}
