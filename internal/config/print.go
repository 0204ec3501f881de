package config

import (
	"github.com/dualmap/dualmap/scheduler"
	"github.com/goccy/go-yaml"
)

// DefaultsYAML renders the defaults as a config file, with one example
// pool (pools have no default: a router needs instances) whose policy
// lists its parameters at their defaults.
func DefaultsYAML() ([]byte, error) {
	c := Config{Pools: []Pool{{Instances: []Instance{{Address: "127.0.0.1:8000"}}}}}.WithDefaults()
	params, err := scheduler.PolicyDefaults(c.Pools[0].Policy.Name)
	if err != nil {
		return nil, err
	}
	c.Pools[0].Policy.Params = params
	return yaml.MarshalWithOptions(c, yaml.UseLiteralStyleIfMultiline(true))
}
