package main

import (
	"fmt"
	"io"
	"os"

	"github.com/dualmap/dualmap/cmd/dualmap/internal/cli"
	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/extproc"
)

const configUsage = `usage:
  dualmap config check FILE [ENVOY.yaml...]
                              validate a configuration file (exit 1 with the offending key if
                              invalid), and the dualmap route settings in Envoy configurations
                              against it (pools, SLO classes, values)
  dualmap config defaults     print every default as a configuration file
`

func runConfig(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, configUsage)
		return fmt.Errorf("%w: config needs check or defaults", cli.ErrUsage)
	}
	switch args[0] {
	case "check":
		if len(args) < 2 {
			fmt.Fprint(stderr, configUsage)
			return fmt.Errorf("%w: config check takes a FILE", cli.ErrUsage)
		}
		c, err := config.Load(args[1])
		if err != nil {
			return err
		}
		instances, xds := 0, 0
		for _, p := range c.Pools {
			instances += len(p.Instances)
			if p.XDS != nil {
				xds++
			}
		}
		fmt.Fprintf(stdout, "%s: ok (%d pools, %d static instances, %d pools from xds)\n", args[1], len(c.Pools), instances, xds)
		for _, f := range args[2:] {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			n, unknown, err := extproc.CheckEnvoyRouteSettings(c, b)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			for _, u := range unknown {
				fmt.Fprintf(stderr, "%s: %s: unknown route setting (dualmap ignores it)\n", f, u)
			}
			fmt.Fprintf(stdout, "%s: ok (%d dualmap route settings)\n", f, n)
		}
		return nil
	case "defaults":
		b, err := config.DefaultsYAML()
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	fmt.Fprint(stderr, configUsage)
	return fmt.Errorf("%w: unknown config command %q", cli.ErrUsage, args[0])
}
