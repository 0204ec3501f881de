// Package cli is what the dualmap subcommands share: the usage error that
// makes the command exit with status 2, and flag parsing.
package cli

import (
	"errors"
	"flag"
	"fmt"
)

// ErrUsage marks a command-line mistake: exit code 2.
var ErrUsage = errors.New("usage")

// ParseFlags parses a subcommand's arguments, which take no positional
// arguments. help is true when the user asked for -h (the flag package has
// printed the usage); any other mistake is an ErrUsage.
func ParseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	return false, nil
}
