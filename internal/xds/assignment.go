package xds

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// EndpointType is the type URL of EDS resources.
const EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"

// maxResources bounds the resources of one response.
const maxResources = 1024

// ErrInvalid wraps every reason an assignment is refused (NACKed).
var ErrInvalid = errors.New("xds: invalid assignment")

// Health is an endpoint's health as the management server reports it.
type Health uint8

const (
	Healthy   Health = iota // HEALTHY, UNKNOWN (not checked), DEGRADED
	Unhealthy               // UNHEALTHY, TIMEOUT
	Draining                // DRAINING: takes no new requests
)

func (h Health) String() string { return [...]string{"healthy", "unhealthy", "draining"}[h] }

// Endpoint is one endpoint of the cluster's assignment.
type Endpoint struct {
	Address  string // IP:port (canonical form, as Envoy prints it)
	Weight   uint32 // load_balancing_weight (1 when unset)
	Health   Health
	Locality string // region/zone/sub_zone, for logs
	Priority uint32 // the locality's priority (0 is the first tier)
	// Role is the endpoint's role in a prefill/decode pool, from its
	// metadata: filter_metadata["dualmap"]["role"] (RoleKey), a string,
	// prefill, decode or both; "" without one.
	Role string
}

// Where an endpoint's role is in its metadata: the string field RoleKey of
// the filter_metadata struct RoleNamespace.
const (
	RoleNamespace = "dualmap"
	RoleKey       = "role"
)

// role reads the endpoint's role from its metadata.
func role(lbe *endpointv3.LbEndpoint) (string, error) {
	ns := lbe.GetMetadata().GetFilterMetadata()[RoleNamespace]
	v, ok := ns.GetFields()[RoleKey]
	if !ok {
		return "", nil
	}
	s, isString := v.GetKind().(*structpb.Value_StringValue)
	if !isString {
		return "", fmt.Errorf("metadata %s.%s is not a string", RoleNamespace, RoleKey)
	}
	switch r := s.StringValue; r {
	case "prefill", "decode", "both":
		return r, nil
	default:
		return "", fmt.Errorf("metadata %s.%s %q is not prefill, decode or both", RoleNamespace, RoleKey, bound(r))
	}
}

// decode reads the assignment of cluster from resp. found is false when
// resp holds no assignment for cluster (nothing to apply; the response is
// still acknowledged). Anything malformed, too large, or not usable as
// an instance (a hostname, a pipe, a named port, a duplicate) is an error
// wrapping ErrInvalid, naming the resource and endpoint.
func decode(resp *discoveryv3.DiscoveryResponse, cluster string, maxEndpoints int) (eps []Endpoint, found bool, err error) {
	if resp.GetTypeUrl() != EndpointType {
		return nil, false, fmt.Errorf("%w: type_url %q, want %s", ErrInvalid, resp.GetTypeUrl(), EndpointType)
	}
	if n := len(resp.GetResources()); n > maxResources {
		return nil, false, fmt.Errorf("%w: %d resources, at most %d", ErrInvalid, n, maxResources)
	}
	var cla *endpointv3.ClusterLoadAssignment
	for i, res := range resp.GetResources() {
		if res.GetTypeUrl() != EndpointType {
			return nil, false, fmt.Errorf("%w: resources[%d]: type_url %q, want %s", ErrInvalid, i, res.GetTypeUrl(), EndpointType)
		}
		c := &endpointv3.ClusterLoadAssignment{}
		if err := proto.Unmarshal(res.GetValue(), c); err != nil {
			return nil, false, fmt.Errorf("%w: resources[%d]: %v", ErrInvalid, i, err)
		}
		if c.GetClusterName() != cluster {
			continue // not ours: a server may send more than was asked for
		}
		if cla != nil {
			return nil, false, fmt.Errorf("%w: cluster %q assigned twice in one response", ErrInvalid, cluster)
		}
		cla = c
	}
	if cla == nil {
		return nil, false, nil
	}
	eps, err = endpoints(cla, maxEndpoints)
	return eps, err == nil, err
}

// endpoints validates cla and returns its endpoints.
func endpoints(cla *endpointv3.ClusterLoadAssignment, maxEndpoints int) ([]Endpoint, error) {
	n := 0
	for _, l := range cla.GetEndpoints() {
		n += len(l.GetLbEndpoints())
	}
	if n > maxEndpoints {
		return nil, fmt.Errorf("%w: cluster %q has %d endpoints, at most %d (xds.max_endpoints)", ErrInvalid, cla.GetClusterName(), n, maxEndpoints)
	}
	if len(cla.GetEndpoints()) > 0 && n == 0 {
		// Localities without endpoints are valid xDS; say so in the log
		// through the caller (an empty list), not here.
		return []Endpoint{}, nil
	}
	eps := make([]Endpoint, 0, n)
	seen := make(map[string]int, n)
	for li, l := range cla.GetEndpoints() {
		loc := locality(l.GetLocality())
		for ei, lbe := range l.GetLbEndpoints() {
			at := fmt.Sprintf("endpoints[%d].lb_endpoints[%d]", li, ei)
			addr, err := address(lbe)
			if err != nil {
				return nil, fmt.Errorf("%w: cluster %q %s: %v", ErrInvalid, cla.GetClusterName(), at, err)
			}
			if j, dup := seen[addr]; dup {
				return nil, fmt.Errorf("%w: cluster %q %s: %s duplicates endpoint %d", ErrInvalid, cla.GetClusterName(), at, addr, j)
			}
			seen[addr] = len(eps)
			w := uint32(1)
			if lw := lbe.GetLoadBalancingWeight(); lw != nil {
				if lw.GetValue() == 0 {
					return nil, fmt.Errorf("%w: cluster %q %s: load_balancing_weight must be >= 1", ErrInvalid, cla.GetClusterName(), at)
				}
				w = lw.GetValue()
			}
			r, err := role(lbe)
			if err != nil {
				return nil, fmt.Errorf("%w: cluster %q %s: %v", ErrInvalid, cla.GetClusterName(), at, err)
			}
			eps = append(eps, Endpoint{Address: addr, Weight: w, Health: health(lbe.GetHealthStatus()), Locality: loc, Priority: l.GetPriority(), Role: r})
		}
	}
	return eps, nil
}

// address is the endpoint's IP:port. Envoy pins requests by IP and port,
// so only a socket address with an IP literal and a numeric port can be
// an instance.
func address(lbe *endpointv3.LbEndpoint) (string, error) {
	ep := lbe.GetEndpoint()
	if ep == nil {
		return "", errors.New("no endpoint (named endpoints are not supported)")
	}
	sa := ep.GetAddress().GetSocketAddress()
	if sa == nil {
		return "", errors.New("not a socket address (pipes and internal addresses cannot be pinned)")
	}
	if sa.GetProtocol() != corev3.SocketAddress_TCP {
		return "", fmt.Errorf("protocol %v, want TCP", sa.GetProtocol())
	}
	ip, err := netip.ParseAddr(sa.GetAddress())
	if err != nil || ip.Zone() != "" {
		return "", fmt.Errorf("address %q is not an IP literal", bound(sa.GetAddress()))
	}
	port := sa.GetPortValue()
	if _, named := sa.GetPortSpecifier().(*corev3.SocketAddress_NamedPort); named || port == 0 || port > 65535 {
		return "", fmt.Errorf("address %q: want a port in [1, 65535]", bound(sa.GetAddress()))
	}
	return net.JoinHostPort(ip.Unmap().String(), strconv.Itoa(int(port))), nil
}

func health(h corev3.HealthStatus) Health {
	switch h {
	case corev3.HealthStatus_UNHEALTHY, corev3.HealthStatus_TIMEOUT:
		return Unhealthy
	case corev3.HealthStatus_DRAINING:
		return Draining
	}
	return Healthy
}

func locality(l *corev3.Locality) string {
	if l == nil {
		return ""
	}
	return bound(l.GetRegion()) + "/" + bound(l.GetZone()) + "/" + bound(l.GetSubZone())
}

// bound shortens text from the server for errors and logs.
func bound(s string) string {
	if len(s) > 128 {
		return s[:128] + "..."
	}
	return s
}
