package main

import (
	"errors"
	"flag"
	"fmt"
)

// parseFlags parses a subcommand's arguments, which take no positional
// arguments. help is true when the user asked for -h (the flag package has
// printed the usage); any other mistake is an errUsage.
func parseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return false, nil
}
