package xds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func lbEndpoint(addr string, port uint32) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: addr, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}}}
}

func cla(cluster string, eps ...*endpointv3.LbEndpoint) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: cluster, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		Locality: &corev3.Locality{Region: "r", Zone: "z"}, LbEndpoints: eps}}}
}

func response(version string, clas ...*endpointv3.ClusterLoadAssignment) *discoveryv3.DiscoveryResponse {
	r := &discoveryv3.DiscoveryResponse{VersionInfo: version, TypeUrl: EndpointType, Nonce: "n-" + version}
	for _, c := range clas {
		a, err := anypb.New(c)
		if err != nil {
			panic(err)
		}
		r.Resources = append(r.Resources, a)
	}
	return r
}

func TestDecode(t *testing.T) {
	weighted := lbEndpoint("10.0.0.2", 80)
	weighted.LoadBalancingWeight = wrapperspb.UInt32(3)
	weighted.HealthStatus = corev3.HealthStatus_DRAINING
	sick := lbEndpoint("::1", 81)
	sick.HealthStatus = corev3.HealthStatus_UNHEALTHY
	zero := lbEndpoint("10.0.0.1", 80)
	zero.LoadBalancingWeight = wrapperspb.UInt32(0)
	named := lbEndpoint("10.0.0.1", 0)
	named.GetEndpoint().Address.GetSocketAddress().PortSpecifier = &corev3.SocketAddress_NamedPort{NamedPort: "http"}
	pipe := &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
		Address: &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: "/tmp/s"}}}}}}
	many := make([]*endpointv3.LbEndpoint, 5)
	for i := range many {
		many[i] = lbEndpoint(fmt.Sprintf("10.0.1.%d", i), 80)
	}
	withRole := func(v *structpb.Value) *endpointv3.LbEndpoint {
		e := lbEndpoint("10.0.0.3", 80)
		e.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			RoleNamespace: {Fields: map[string]*structpb.Value{RoleKey: v}}}}
		return e
	}
	bad := response("1")
	bad.TypeUrl = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	tests := []struct {
		name  string
		resp  *discoveryv3.DiscoveryResponse
		want  []Endpoint
		found bool
		err   string
	}{
		{name: "endpoints", resp: response("1", cla("c", lbEndpoint("10.0.0.1", 80), weighted, sick)), found: true, want: []Endpoint{
			{Address: "10.0.0.1:80", Weight: 1, Locality: "r/z/"},
			{Address: "10.0.0.2:80", Weight: 3, Health: Draining, Locality: "r/z/"},
			{Address: "[::1]:81", Weight: 1, Health: Unhealthy, Locality: "r/z/"},
		}},
		{name: "roles", resp: response("1", cla("c", withRole(structpb.NewStringValue("prefill")), lbEndpoint("10.0.0.4", 80))), found: true, want: []Endpoint{
			{Address: "10.0.0.3:80", Weight: 1, Locality: "r/z/", Role: "prefill"},
			{Address: "10.0.0.4:80", Weight: 1, Locality: "r/z/"},
		}},
		{name: "unknown role", resp: response("1", cla("c", withRole(structpb.NewStringValue("prefiller")))), err: `"prefiller" is not prefill, decode or both`},
		{name: "role not a string", resp: response("1", cla("c", withRole(structpb.NewNumberValue(1)))), err: "is not a string"},
		{name: "empty assignment", resp: response("1", cla("c")), found: true, want: []Endpoint{}},
		{name: "other cluster only", resp: response("1", cla("other", lbEndpoint("10.0.0.1", 80)))},
		{name: "no resources", resp: response("1")},
		{name: "wrong type", resp: bad, err: "type_url"},
		{name: "twice", resp: response("1", cla("c"), cla("c")), err: "assigned twice"},
		{name: "hostname", resp: response("1", cla("c", lbEndpoint("vllm.svc", 80))), err: `lb_endpoints[0]: address "vllm.svc" is not an IP literal`},
		{name: "port 0", resp: response("1", cla("c", lbEndpoint("10.0.0.1", 0))), err: "want a port"},
		{name: "named port", resp: response("1", cla("c", named)), err: "want a port"},
		{name: "pipe", resp: response("1", cla("c", pipe)), err: "not a socket address"},
		{name: "duplicate", resp: response("1", cla("c", lbEndpoint("10.0.0.1", 80), lbEndpoint("10.0.0.1", 80))), err: "duplicates endpoint 0"},
		{name: "zero weight", resp: response("1", cla("c", zero)), err: "load_balancing_weight"},
		{name: "too many", resp: response("1", cla("c", many...)), err: "has 5 endpoints, at most 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eps, found, err := decode(tt.resp, "c", 4)
			if tt.err != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("decode() error = %v, want ErrInvalid mentioning %q", err, tt.err)
				}
				return
			}
			if err != nil || found != tt.found || fmt.Sprint(eps) != fmt.Sprint(tt.want) {
				t.Errorf("decode() = %v, %v, %v; want %v, %v", eps, found, err, tt.want, tt.found)
			}
		})
	}
}

// fakeADS is a management server the test drives message by message.
type fakeADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	push chan *discoveryv3.DiscoveryResponse // sent on the open stream
	reqs chan *discoveryv3.DiscoveryRequest  // every request received
}

func (f *fakeADS) StreamAggregatedResources(s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	errc := make(chan error, 1)
	go func() {
		for {
			r, err := s.Recv()
			if err != nil {
				errc <- err
				return
			}
			f.reqs <- r
		}
	}()
	for {
		select {
		case r := <-f.push:
			if err := s.Send(r); err != nil {
				return err
			}
		case err := <-errc:
			return err
		}
	}
}

func serveADS(t *testing.T, addr string) (*fakeADS, *grpc.Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeADS{push: make(chan *discoveryv3.DiscoveryResponse), reqs: make(chan *discoveryv3.DiscoveryRequest, 16)}
	g := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, f)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return f, g, lis.Addr().String()
}

func next(t *testing.T, f *fakeADS) *discoveryv3.DiscoveryRequest {
	t.Helper()
	select {
	case r := <-f.reqs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no discovery request within 10s")
		return nil
	}
}

func TestClientAckNackReconnect(t *testing.T) {
	f, g, addr := serveADS(t, "127.0.0.1:0")
	c, err := New(Options{Address: addr, Cluster: "c", NodeID: "n1", Backoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	var applied [][]Endpoint
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.Run(ctx, func(eps []Endpoint) error {
			mu.Lock()
			defer mu.Unlock()
			if len(eps) == 3 {
				return errors.New("three is refused by the caller")
			}
			applied = append(applied, eps)
			return nil
		})
		close(done)
	}()
	defer func() { cancel(); <-done }()

	r := next(t, f)
	if r.GetNode().GetId() != "n1" || r.GetTypeUrl() != EndpointType || fmt.Sprint(r.GetResourceNames()) != "[c]" || r.GetVersionInfo() != "" {
		t.Fatalf("first request = %v", r)
	}
	f.push <- response("v1", cla("c", lbEndpoint("10.0.0.1", 80)))
	if r := next(t, f); r.GetVersionInfo() != "v1" || r.GetResponseNonce() != "n-v1" || r.GetErrorDetail() != nil {
		t.Fatalf("after v1: %v, want an ACK of v1", r)
	}
	f.push <- response("v2", cla("c", lbEndpoint("bad host", 80)))
	if r := next(t, f); r.GetVersionInfo() != "v1" || r.GetResponseNonce() != "n-v2" || !strings.Contains(r.GetErrorDetail().GetMessage(), "not an IP literal") {
		t.Fatalf("after bad v2: %v, want a NACK keeping v1 with the reason", r)
	}
	f.push <- response("v3", cla("c", lbEndpoint("10.0.0.1", 80), lbEndpoint("10.0.0.2", 80), lbEndpoint("10.0.0.3", 80)))
	if r := next(t, f); r.GetVersionInfo() != "v1" || !strings.Contains(r.GetErrorDetail().GetMessage(), "refused by the caller") {
		t.Fatalf("after v3: %v, want a NACK with apply's error", r)
	}
	if up, _ := c.Since(); !up {
		t.Errorf("Since() = down with an open stream")
	}

	// The server goes away: the client reports it, then reconnects to a
	// new server on the same address, asking with the version it has.
	g.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for up, _ := c.Since(); up; up, _ = c.Since() {
		if time.Now().After(deadline) {
			t.Fatal("Since() still up 10s after the server stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f2, _, _ := serveADS(t, addr)
	if r := next(t, f2); r.GetVersionInfo() != "v1" || r.GetResponseNonce() != "" {
		t.Fatalf("after reconnecting: %v, want a request carrying v1", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(applied) != 1 || len(applied[0]) != 1 || applied[0][0].Address != "10.0.0.1:80" {
		t.Errorf("applied = %v, want only v1's endpoint", applied)
	}
}
