package trace

import "errors"

// Sentinel errors. Every error of the package starts with "trace: " and
// wraps one of these, so callers can test for the kind with errors.Is.
var (
	// ErrMalformed is wrapped by errors about one input line, formatted as
	// "trace: line N: malformed: <what>".
	ErrMalformed = errors.New("malformed")
	// ErrLineTooLong is wrapped, together with ErrMalformed, by the error
	// about a line longer than Options.MaxLineBytes.
	ErrLineTooLong = errors.New("line too long")
	// ErrInvalidOptions is wrapped by errors about Options.
	ErrInvalidOptions = errors.New("invalid options")
	// ErrInvalidConfig is wrapped by errors about a GenConfig; the message
	// names the offending field.
	ErrInvalidConfig = errors.New("invalid generator config")
	// ErrInvalidArgument is wrapped by errors about a bad argument.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrTooFewRequests is wrapped when an operation needs more requests
	// than the trace has.
	ErrTooFewRequests = errors.New("too few requests")
	// ErrInvalidRequest is wrapped by Write for a request it cannot write.
	ErrInvalidRequest = errors.New("invalid request")
)
