package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/dualmap/dualmap/cmd/dualmap/internal/cli"
	"github.com/dualmap/dualmap/internal/sim"
	"github.com/dualmap/dualmap/internal/sim/trace"
	"github.com/dualmap/dualmap/scheduler"
)

// pdPolicies are the policies of a P/D sizing when --policies is not given.
const pdPolicies = "dualmap,least-loaded,round-robin"

// parsePDSplits reads --pd: comma-separated pools, each N (N mixed
// instances) or P:D (P prefill and D decode instances).
func parsePDSplits(s string) ([]sim.PDSplit, error) {
	var out []sim.PDSplit
	for _, f := range splitList(s) {
		p, d, pd := strings.Cut(f, ":")
		a, err := strconv.Atoi(p)
		if err != nil || a < 1 {
			return nil, fmt.Errorf("%q: want N or P:D with whole numbers >= 1", f)
		}
		if !pd {
			out = append(out, sim.PDSplit{Mixed: a})
			continue
		}
		b, err := strconv.Atoi(d)
		if err != nil || b < 1 {
			return nil, fmt.Errorf("%q: want N or P:D with whole numbers >= 1", f)
		}
		out = append(out, sim.PDSplit{Prefill: a, Decode: b})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no pool given")
	}
	return out, nil
}

// runPDSizing is `dualmap sim --pd`: each pool at each rate with each
// policy, as a Markdown table (sim.PDSizing).
func runPDSizing(stdout io.Writer, tr *trace.Trace, splits string, qps []float64, policies string, base sim.Options, pd sim.PDOptions) error {
	sp, err := parsePDSplits(splits)
	if err != nil {
		return fmt.Errorf("%w: --pd: %v", cli.ErrUsage, err)
	}
	if len(qps) == 0 {
		return fmt.Errorf("%w: --pd needs --qps", cli.ErrUsage)
	}
	pols := splitList(policies)
	for _, p := range pols {
		if !slices.Contains(scheduler.Policies(), p) {
			return fmt.Errorf("%w: --policies: %q: a P/D sizing takes policy names (%s)", cli.ErrUsage, p, strings.Join(scheduler.Policies(), ", "))
		}
	}
	rows, err := sim.PDSizing(tr, qps, base, sp, pols, pd)
	if err != nil {
		return err
	}
	return sim.WritePDTable(stdout, rows)
}

// isSet reports whether flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
