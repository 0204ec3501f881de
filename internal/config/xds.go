package config

import (
	"crypto/tls"
	"time"
)

// XDS points a pool at an xDS management server (Istio, Envoy Gateway, a
// go-control-plane server): the pool's instances are the endpoints of one
// cluster's ClusterLoadAssignment, the list Envoy itself routes to.
type XDS struct {
	// Address is the management server, host:port (gRPC).
	Address string `yaml:"address"`
	// API is "ads" (default: the aggregated discovery service, as Envoy's
	// ads_config) or "eds" (the endpoint discovery service alone).
	API string `yaml:"api"`
	// Cluster is the name of the cluster whose endpoints to take, as
	// Envoy's EDS cluster names it (eds_cluster_config.service_name, or
	// the cluster's name).
	Cluster string `yaml:"cluster"`
	// NodeID is the node id dualmap presents (default "dualmap"); the
	// management server may key its snapshots by it. NodeCluster is the
	// node's cluster (default "dualmap").
	NodeID      string `yaml:"node_id"`
	NodeCluster string `yaml:"node_cluster"`
	// TLS as for state.redis: tls turns it on with the system's roots;
	// tls_ca_file (PEM) replaces them; tls_cert_file and tls_key_file are
	// a client certificate; tls_server_name overrides the name verified.
	// Any tls_* key turns TLS on. Off: plaintext (loopback, or a mesh
	// sidecar that adds mTLS).
	TLS           bool   `yaml:"tls"`
	TLSCAFile     string `yaml:"tls_ca_file"`
	TLSCertFile   string `yaml:"tls_cert_file"`
	TLSKeyFile    string `yaml:"tls_key_file"`
	TLSServerName string `yaml:"tls_server_name"`
	// Grace is how long the management server may be unreachable before
	// /readyz reports it (default 30s). The last list received stays in
	// use all the while.
	Grace time.Duration `yaml:"grace"`
	// MaxEndpoints bounds one assignment (default 4096); a larger one is
	// refused (NACK) and the last good list stays.
	MaxEndpoints int `yaml:"max_endpoints"`
}

// Defaults of pools[].xds.
const (
	DefaultXDSNode         = "dualmap"
	DefaultXDSGrace        = 30 * time.Second
	DefaultXDSMaxEndpoints = 4096
	XDSMaxEndpointsLimit   = 65536
)

func (x XDS) withDefaults() XDS {
	if x.API == "" {
		x.API = "ads"
	}
	if x.NodeID == "" {
		x.NodeID = DefaultXDSNode
	}
	if x.NodeCluster == "" {
		x.NodeCluster = DefaultXDSNode
	}
	if x.Grace == 0 {
		x.Grace = DefaultXDSGrace
	}
	if x.MaxEndpoints == 0 {
		x.MaxEndpoints = DefaultXDSMaxEndpoints
	}
	return x
}

func (x XDS) validate(at string) error {
	switch {
	case x.Address == "":
		return invalid(at+".address", "required (host:port of the management server)")
	case validAddr(at+".address", x.Address) != nil:
		return validAddr(at+".address", x.Address)
	case x.API != "ads" && x.API != "eds":
		return invalid(at+".api", "%q is not ads or eds", x.API)
	case x.Cluster == "":
		return invalid(at+".cluster", "required (the cluster whose endpoints Envoy routes to)")
	case len(x.Cluster) > 256 || len(x.NodeID) > 256 || len(x.NodeCluster) > 256:
		return invalid(at, "cluster, node_id and node_cluster must be at most 256 bytes")
	case x.Grace < time.Second:
		return invalid(at+".grace", "must be >= 1s, got %v", x.Grace)
	case x.MaxEndpoints < 1 || x.MaxEndpoints > XDSMaxEndpointsLimit:
		return invalid(at+".max_endpoints", "must be in [1, %d], got %d", XDSMaxEndpointsLimit, x.MaxEndpoints)
	}
	_, err := x.tlsFiles().config(at + ".")
	return err
}

func (x XDS) tlsFiles() tlsFiles {
	return tlsFiles{on: x.TLS, ca: x.TLSCAFile, cert: x.TLSCertFile, key: x.TLSKeyFile, server: x.TLSServerName}
}

// TLSConfig is the TLS client configuration of the connection to the
// management server, nil for plaintext. at is the key's YAML path, for
// errors.
func (x XDS) TLSConfig(at string) (*tls.Config, error) {
	return x.tlsFiles().config(at + ".")
}
