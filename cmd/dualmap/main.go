// Command dualmap is the DualMap LLM request router: an Envoy ext_proc
// server (serve), a trace-driven cluster simulator (sim), a simulated model
// server (engine), a stand-in prefill/decode sidecar (pd-sidecar), a trace replayer (replay) and configuration tools (config).
//
// This file only dispatches subcommands; each lives in its own file, and
// serve, the router, in its own package (internal/servecmd), whose
// dependencies leave out what only the other subcommands need (the
// simulator's charts). What they share is in internal/cli.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/dualmap/dualmap/cmd/dualmap/internal/cli"
	"github.com/dualmap/dualmap/cmd/dualmap/internal/servecmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"serve":      {"run the Envoy ext_proc routing server", servecmd.Run},
		"sim":        {"run the trace-driven cluster simulator", runSim},
		"engine":     {"run a simulated OpenAI-compatible model server", runEngine},
		"pd-sidecar": {"run a stand-in P/D sidecar in front of a decode engine", runPDSidecar},
		"replay":     {"replay a trace against an OpenAI-compatible URL", runReplay},
		"config":     {"check a config file or print the defaults", runConfig},
		"version":    {"print the version", runVersion},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "dualmap: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	if err := cmd.run(args[1:], stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "dualmap %s: %v\n", args[0], err)
		if errors.Is(err, cli.ErrUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func usage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: dualmap <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
}

func runVersion(args []string, stdout, _ io.Writer) error {
	if len(args) != 0 {
		return fmt.Errorf("%w: version takes no arguments", cli.ErrUsage)
	}
	fmt.Fprintf(stdout, "dualmap %s\n", version)
	return nil
}
