package extproc

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/dualmap/dualmap/internal/config"
)

// CheckEnvoyRouteSettings finds the dualmap route settings in an Envoy
// configuration (YAML or JSON): gRPC initial metadata entries whose key
// starts with x-dualmap- (grpc_service.initial_metadata, a route's
// overrides.grpc_initial_metadata), and set_metadata entries of the
// namespace dualmap. It checks each as serving would against cfg (pools,
// SLO classes, value formats) and returns how many it found, the unknown
// keys (which serving ignores) and the first error, named by its place in
// the file. It cannot tell which settings a route combines; each is
// checked on its own.
func CheckEnvoyRouteSettings(cfg config.Config, envoyYAML []byte) (found int, unknown []string, err error) {
	var doc any
	if err := yaml.Unmarshal(envoyYAML, &doc); err != nil {
		return 0, nil, fmt.Errorf("envoy config: %w", err)
	}
	pools := map[string]bool{}
	for _, p := range cfg.Pools {
		pools[p.Name] = true
	}
	check := func(at string, s setting) error {
		found++
		_, unk, err := parseSettings([]setting{s}, func(n string) bool { return pools[n] }, cfg.SLOFor)
		if err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		if len(unk) > 0 {
			unknown = append(unknown, at+": "+s.key)
		}
		return nil
	}
	var walk func(at, key string, v any) error
	walk = func(at, key string, v any) error {
		switch v := v.(type) {
		case map[string]any:
			if v["metadata_namespace"] == settingsNamespace {
				if m, ok := v["value"].(map[string]any); ok {
					for k, val := range m {
						text, err := yamlScalar(val)
						if err != nil {
							return fmt.Errorf("%s.value.%s: %w: %v", at, k, errRouteSetting, err)
						}
						if err := check(at+".value."+k, setting{key: k, value: text, source: "metadata"}); err != nil {
							return err
						}
					}
				}
			}
			for k, c := range v {
				if err := walk(at+"."+k, k, c); err != nil {
					return err
				}
			}
		case []any:
			metadata := key == "initial_metadata" || key == "grpc_initial_metadata"
			for i, c := range v {
				item := fmt.Sprintf("%s[%d]", at, i)
				if m, ok := c.(map[string]any); ok && metadata {
					k, _ := m["key"].(string)
					if k = strings.ToLower(k); strings.HasPrefix(k, settingsMetaPrefix) {
						name := strings.ReplaceAll(strings.TrimPrefix(k, settingsMetaPrefix), "-", "_")
						if err := check(item, setting{key: name, value: fmt.Sprint(m["value"]), source: "grpc_metadata"}); err != nil {
							return err
						}
					}
				}
				if err := walk(item, "", c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err = walk("", "", doc)
	return found, unknown, err
}

// yamlScalar is the text of a string, number or boolean, as forwarded
// metadata carries it.
func yamlScalar(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return fmt.Sprint(v), nil
	case uint64, int64, int, float64:
		return fmt.Sprint(v), nil
	}
	return "", fmt.Errorf("want a string, number or boolean")
}
