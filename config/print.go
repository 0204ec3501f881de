package config

import (
	"github.com/goccy/go-yaml"
)

// DefaultsYAML renders the defaults as a config file, with one example
// pool (pools have no default: a router needs instances).
func DefaultsYAML() ([]byte, error) {
	c := Config{Pools: []Pool{{Instances: []Instance{{Address: "127.0.0.1:8000"}}}}}.WithDefaults()
	return yaml.MarshalWithOptions(c, yaml.UseLiteralStyleIfMultiline(true))
}
