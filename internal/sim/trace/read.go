package trace

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Read reads a JSON Lines trace from r in the format opt.Format (see the
// package documentation). Blank lines are ignored. The requests are sorted
// stably by arrival and shifted so that the earliest arrives at 0. An input
// without requests gives an empty trace, not an error.
//
// A malformed line (invalid JSON, a missing field or one of the wrong
// type, a failed check, or a line longer than opt.MaxLineBytes) makes Read
// fail with an error "trace: line N: malformed: <what>" wrapping
// ErrMalformed, N counting every line from 1; with opt.SkipMalformed the
// line is counted in Trace.Skipped instead. Errors of r are returned
// wrapped, and invalid options wrap ErrInvalidOptions.
func Read(r io.Reader, opt Options) (*Trace, error) {
	opt, err := opt.resolve()
	if err != nil {
		return nil, err
	}
	return read(r, opt, "trace: ")
}

// ReadFile is Read on the file at path; its errors name the path, and the
// trace's Source is path.
func ReadFile(path string, opt Options) (*Trace, error) {
	opt, err := opt.resolve()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	t, err := read(f, opt, "trace: "+path+": ")
	if err != nil {
		return nil, err
	}
	t.Source = path
	return t, nil
}

// read does Read with resolved options; prefix starts every error message.
func read(r io.Reader, opt Options, prefix string) (*Trace, error) {
	lr := newLineReader(r, opt.MaxLineBytes, 64<<10)
	dec := newDecoder(opt)
	t := &Trace{BlockSize: opt.BlockSize}
	for opt.Limit == 0 || len(t.Requests) < opt.Limit {
		line, tooLong, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%sline %d: read: %w", prefix, lr.n+1, err)
		}
		var req Request
		switch {
		case tooLong:
			err = fmt.Errorf("%w: exceeds %d bytes (Options.MaxLineBytes)", ErrLineTooLong, opt.MaxLineBytes)
		case isBlank(line):
			continue
		default:
			req, err = dec.decode(line)
		}
		if err != nil {
			if opt.SkipMalformed {
				t.Skipped++
				continue
			}
			return nil, fmt.Errorf("%sline %d: %w: %w", prefix, lr.n, ErrMalformed, err)
		}
		t.Requests = append(t.Requests, req)
	}
	normalise(t.Requests)
	return t, nil
}
