package main

import (
	"fmt"
	"io"

	"github.com/dualmap/dualmap/cmd/dualmap/internal/cli"
	"github.com/dualmap/dualmap/internal/config"
)

const configUsage = `usage:
  dualmap config check FILE   validate a configuration file (exit 1 with the offending key if invalid)
  dualmap config defaults     print every default as a configuration file
`

func runConfig(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, configUsage)
		return fmt.Errorf("%w: config needs check or defaults", cli.ErrUsage)
	}
	switch args[0] {
	case "check":
		if len(args) != 2 {
			fmt.Fprint(stderr, configUsage)
			return fmt.Errorf("%w: config check takes one FILE", cli.ErrUsage)
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
