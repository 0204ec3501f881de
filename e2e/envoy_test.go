//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// Every Envoy bootstrap in envoy/ loads in a real Envoy.
func TestEnvoyConfigsValidate(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "envoy", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("envoy/*.yaml = %v, %v; want the bootstraps", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { validate(t, f) })
	}
	t.Run("rendered front-proxy", func(t *testing.T) {
		src, _ := os.ReadFile(filepath.Join(repoRoot, "envoy", "front-proxy.yaml"))
		p := filepath.Join(t.TempDir(), "r.yaml")
		os.WriteFile(p, []byte(renderFrontProxy(string(src), 18080, 19901, []int{19002, 19003}, []int{18001, 18002, 18003})), 0o644)
		validate(t, p)
	})
}

func validate(t *testing.T, path string) {
	t.Helper()
	out, err := exec.Command(envoyBin, "--mode", "validate", "-c", path).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("envoy --mode validate %s: %v\n%s", path, err, out)
	}
}

// The Kubernetes examples: the Istio patch's filter is loaded by a real
// Envoy inside a minimal bootstrap; the Envoy Gateway policy is checked
// for the settings the router needs.
func TestKubernetesExamples(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "envoy", "k8s", "istio-envoyfilter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ef struct {
		Spec struct {
			ConfigPatches []struct {
				Patch struct {
					Value map[string]any `yaml:"value"`
				} `yaml:"patch"`
			} `yaml:"configPatches"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(raw, &ef); err != nil || len(ef.Spec.ConfigPatches) != 1 {
		t.Fatalf("istio example: %v", err)
	}
	filter, err := yaml.Marshal([]any{ef.Spec.ConfigPatches[0].Patch.Value, map[string]any{
		"name":         "envoy.filters.http.router",
		"typed_config": map[string]any{"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"request_body_mode: FULL_DUPLEX_STREAMED", "response_body_mode: FULL_DUPLEX_STREAMED", "request_trailer_mode: SEND", "response_trailer_mode: SEND"} {
		if !strings.Contains(string(filter), want) {
			t.Errorf("istio example's filter lacks %q:\n%s", want, filter)
		}
	}
	boot := `static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 1}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: l
          route_config: {virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: "outbound|9002||dualmap.llm.svc.cluster.local"}}]}]}
          http_filters:
` + indent(string(filter), "          ") + `
  clusters:
  - name: "outbound|9002||dualmap.llm.svc.cluster.local"
    type: STATIC
    load_assignment: {cluster_name: x, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 9002}}}}]}]}
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
`
	p := filepath.Join(t.TempDir(), "istio-boot.yaml")
	os.WriteFile(p, []byte(boot), 0o644)
	validate(t, p)

	raw, err = os.ReadFile(filepath.Join(repoRoot, "envoy", "k8s", "envoy-gateway-extension-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var eg struct {
		Kind string `yaml:"kind"`
		Spec struct {
			ExtProc []struct {
				FailOpen       bool   `yaml:"failOpen"`
				MessageTimeout string `yaml:"messageTimeout"`
				ProcessingMode struct {
					Request struct {
						Body string `yaml:"body"`
					} `yaml:"request"`
					Response struct {
						Body string `yaml:"body"`
					} `yaml:"response"`
				} `yaml:"processingMode"`
			} `yaml:"extProc"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(raw, &eg); err != nil || eg.Kind != "EnvoyExtensionPolicy" || len(eg.Spec.ExtProc) != 1 {
		t.Fatalf("envoy gateway example: %v %+v", err, eg)
	}
	if x := eg.Spec.ExtProc[0]; x.FailOpen || x.ProcessingMode.Request.Body != "FullDuplexStreamed" || x.ProcessingMode.Response.Body != "FullDuplexStreamed" || x.MessageTimeout == "" {
		t.Errorf("envoy gateway example settings = %+v, want fail closed, full-duplex bodies both ways, a message timeout", x)
	}
}

func indent(s, pre string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = pre + lines[i]
	}
	return strings.Join(lines, "\n")
}

// Where a shipped Envoy reports the served endpoint in a response header
// (x-dualmap-upstream-host, or the gateway's
// x-gateway-destination-endpoint-served turned into metadata), it writes
// over the upstream's own value: a model server cannot name another
// instance as the one that served.
func TestShippedEnvoyOverwritesServedHost(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repoRoot, "envoy", "*.yaml"))
	files = append(files, filepath.Join(repoRoot, "charts", "dualmap", "templates", "envoy.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i, l := range lines {
			if !strings.Contains(l, "value: \"%UPSTREAM_HOST%\"") {
				continue
			}
			if i+1 >= len(lines) || !strings.Contains(lines[i+1], "append_action: OVERWRITE_IF_EXISTS_OR_ADD") {
				t.Errorf("%s:%d: %s is added, not written over the upstream's", f, i+1, strings.TrimSpace(l))
			}
		}
	}
}

// engineKeepAlive is how long the engines we front keep an idle
// keep-alive connection open: vLLM's and SGLang's uvicorn
// (timeout_keep_alive) and llama-server's cpp-httplib all close it after
// 5 s.
const engineKeepAlive = 5 * time.Second

// Every shipped Envoy closes an idle connection to a model server before
// the engine does. Otherwise a request Envoy writes on a pooled connection
// just as the engine closes it gets a 503 ("upstream connect error or
// disconnect/reset before headers. reset reason: connection termination")
// where the route does not retry resets (gateway-epp.yaml), and costs a
// retry where it does.
func TestShippedEnvoyClosesIdleEngineConnectionsFirst(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repoRoot, "envoy", "*.yaml"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var boot struct {
			StaticResources struct {
				Clusters []struct {
					Name    string `yaml:"name"`
					Options map[string]struct {
						Common struct {
							IdleTimeout string `yaml:"idle_timeout"`
						} `yaml:"common_http_protocol_options"`
					} `yaml:"typed_extension_protocol_options"`
				} `yaml:"clusters"`
			} `yaml:"static_resources"`
		}
		if err := yaml.Unmarshal(raw, &boot); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		engines := 0
		for _, c := range boot.StaticResources.Clusters {
			if c.Name != "model_servers" && c.Name != "inference_pool" {
				continue
			}
			engines++
			s := c.Options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].Common.IdleTimeout
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 || d >= engineKeepAlive {
				t.Errorf("%s: cluster %s's upstream idle_timeout is %q (Envoy's default is 1 h); want below the engines' %v keep-alive", filepath.Base(f), c.Name, s, engineKeepAlive)
			}
		}
		if engines != 1 {
			t.Errorf("%s: %d model-server clusters (model_servers or inference_pool), want 1", filepath.Base(f), engines)
		}
	}
	// The chart's template is not YAML until rendered (charts/test checks
	// its output in a real Envoy): its one model-server cluster says so too.
	b, err := os.ReadFile(filepath.Join(repoRoot, "charts", "dualmap", "templates", "envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "common_http_protocol_options: {idle_timeout: 4s}"); n != 1 {
		t.Errorf("charts/dualmap/templates/envoy.yaml sets the model servers' idle_timeout %d times, want once", n)
	}
	// Envoy Gateway's policy for the route.
	b, err = os.ReadFile(filepath.Join(repoRoot, "examples", "envoy-gateway", "resources", "dualmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "connectionIdleTimeout: 4s") {
		t.Errorf("examples/envoy-gateway/resources/dualmap.yaml: the BackendTrafficPolicy sets no connectionIdleTimeout below the engines' keep-alive")
	}
}
