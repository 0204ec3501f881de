package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestXDSKeys(t *testing.T) {
	c, err := Parse([]byte("pools:\n  - xds: {address: '127.0.0.1:18000', cluster: model_servers}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	x := c.Pools[0].XDS
	if x == nil || x.API != "ads" || x.NodeID != DefaultXDSNode || x.Grace != DefaultXDSGrace || x.MaxEndpoints != DefaultXDSMaxEndpoints {
		t.Errorf("Parse(xds) = %+v, want the defaults filled in", x)
	}
	if tc, err := x.TLSConfig("pools[0].xds"); err != nil || tc != nil {
		t.Errorf("TLSConfig() = %v, %v; want plaintext", tc, err)
	}
	c, err = Parse([]byte("pools:\n  - xds: {address: 'cp.istio-system:15010', cluster: c, api: eds, tls: true, grace: 5s, node_id: n}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if x := c.Pools[0].XDS; x.API != "eds" || x.Grace != 5*time.Second || x.NodeID != "n" {
		t.Errorf("Parse(xds) = %+v", x)
	}
	if tc, err := c.Pools[0].XDS.TLSConfig("x"); err != nil || tc == nil {
		t.Errorf("TLSConfig(tls: true) = %v, %v; want a TLS config", tc, err)
	}
}

func TestXDSErrorsNameTheKey(t *testing.T) {
	pool := func(xds string) string { return "pools:\n  - xds: {" + xds + "}\n" }
	tests := []struct{ name, yaml, want string }{
		{"no address", pool("cluster: c"), "pools[0].xds.address: required"},
		{"bad address", pool("address: nowhere, cluster: c"), "pools[0].xds.address"},
		{"no cluster", pool("address: '127.0.0.1:1'"), "pools[0].xds.cluster: required"},
		{"api", pool("address: '127.0.0.1:1', cluster: c, api: rest"), "pools[0].xds.api"},
		{"grace", pool("address: '127.0.0.1:1', cluster: c, grace: 10ms"), "pools[0].xds.grace"},
		{"max endpoints", pool("address: '127.0.0.1:1', cluster: c, max_endpoints: -1"), "pools[0].xds.max_endpoints"},
		{"ca file", pool("address: '127.0.0.1:1', cluster: c, tls_ca_file: /nonexistent"), "pools[0].xds.tls_ca_file"},
		{"key without cert", pool("address: '127.0.0.1:1', cluster: c, tls_key_file: /nonexistent"), "pools[0].xds.tls_cert_file"},
		{"unknown key", pool("address: '127.0.0.1:1', cluster: c, nodeid: x"), "nodeid"},
		{"priority header", minimal + "routing: {priority_header: 'X-P'}\n", "routing.priority_header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), nil)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse() error = %v, want ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}
}
