package extproc

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	"github.com/dualmap/dualmap/internal/pool"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// controlPlane is a go-control-plane management server with a snapshot
// cache on loopback.
type controlPlane struct {
	cache cachev3.SnapshotCache
	addr  string
	g     *grpc.Server
	ver   int
}

func startControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cp := &controlPlane{cache: cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil), addr: lis.Addr().String(), g: grpc.NewServer()}
	ctx, cancel := context.WithCancel(context.Background())
	srv := serverv3.NewServer(ctx, cp.cache, nil)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(cp.g, srv)
	endpointservice.RegisterEndpointDiscoveryServiceServer(cp.g, srv)
	go cp.g.Serve(lis)
	t.Cleanup(func() { cp.g.Stop(); cancel() })
	return cp
}

// xdsEndpoint is one endpoint of a snapshot: "IP:port", optional
// "/draining", "/unhealthy" or "/wN" (weight N) suffixes.
func xdsEndpoint(t *testing.T, spec string) *endpointv3.LbEndpoint {
	parts := strings.Split(spec, "/")
	host, port, _ := net.SplitHostPort(parts[0])
	var p uint32
	fmt.Sscan(port, &p)
	e := &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p}}}}}}}
	for _, s := range parts[1:] {
		switch {
		case s == "draining":
			e.HealthStatus = corev3.HealthStatus_DRAINING
		case s == "unhealthy":
			e.HealthStatus = corev3.HealthStatus_UNHEALTHY
		case strings.HasPrefix(s, "w"):
			var w uint32
			fmt.Sscan(s[1:], &w)
			e.LoadBalancingWeight = wrapperspb.UInt32(w)
		default:
			t.Fatalf("bad endpoint spec %q", spec)
		}
	}
	return e
}

// set publishes cluster's endpoints to node.
func (cp *controlPlane) set(t *testing.T, node, cluster string, eps ...string) {
	t.Helper()
	cp.ver++
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: cluster, Endpoints: []*endpointv3.LocalityLbEndpoints{{}}}
	for _, e := range eps {
		cla.Endpoints[0].LbEndpoints = append(cla.Endpoints[0].LbEndpoints, xdsEndpoint(t, e))
	}
	snap, err := cachev3.NewSnapshot(fmt.Sprint(cp.ver), map[resource.Type][]types.Resource{resource.EndpointType: {cla}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}

// states is the pool's membership as "id:healthy:draining:weight" strings.
func states(p *pool.Pool) []string {
	var out []string
	for _, st := range p.Instances() {
		out = append(out, fmt.Sprintf("%s:%v:%v", st.ID, st.Healthy, st.Draining))
	}
	slices.Sort(out)
	return out
}

func waitStates(t *testing.T, p *pool.Pool, want ...string) {
	t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(states(p), want) {
		if time.Now().After(deadline) {
			t.Fatalf("pool instances = %v, want %v", states(p), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// healthyEndpoints starts n loopback servers that answer every request
// (the pool's health probe included) with 200, and returns their
// addresses: an xDS endpoint the probe cannot reach would be taken out by
// whichever sweep runs after it arrived.
func healthyEndpoints(t *testing.T, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		t.Cleanup(s.Close)
		out[i] = s.Listener.Addr().String()
	}
	return out
}

// A pool takes its instances from a management server (ADS and EDS alike):
// additions, removals, draining and health apply; a bad assignment keeps
// the last good list; when the server goes away the list stays and
// readiness says so after the grace.
func TestXDSPool(t *testing.T) {
	for _, api := range []string{"ads", "eds"} {
		t.Run(api, func(t *testing.T) {
			ep := healthyEndpoints(t, 4)
			cp := startControlPlane(t)
			cfg := parseConfig(t, fmt.Sprintf(`
pools:
  - xds: {address: %q, cluster: model_servers, api: %s, node_id: router-1, grace: 1s}
health: {interval: 1h}
`, cp.addr, api))
			ts := start(t, cfg, true)
			p := ts.srv.pools.Pools()[0]
			if err := ts.srv.Ready(); err == nil {
				t.Errorf("Ready() = nil before any endpoint arrived")
			}
			cp.set(t, "router-1", "model_servers", ep[0], ep[1]+"/w3")
			waitStates(t, p, ep[0]+":true:false", ep[1]+":true:false")
			if err := ts.srv.Ready(); err != nil {
				t.Errorf("Ready() = %v with endpoints", err)
			}
			if n := testutil.ToFloat64(gauge(t, ts, "dualmap_xds_connected")); n != 1 {
				t.Errorf("dualmap_xds_connected = %v with a stream open, want 1", n)
			}

			// One drains, one is added unhealthy, one removed.
			cp.set(t, "router-1", "model_servers", ep[1]+"/draining", ep[2]+"/unhealthy", ep[3])
			after := []string{ep[1] + ":true:true", ep[2] + ":false:false", ep[3] + ":true:false"}
			waitStates(t, p, after...)
			for i := 0; i < 20; i++ {
				c := ts.open(t)
				r := ts.post(t, c, "/v1/chat/completions", chat("m", fmt.Sprint("q", i), false))
				dest := strings.Split(setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"), ",")[0]
				c.responseHeaders(t, "200")
				c.close()
				if dest != ep[3] {
					t.Fatalf("request %d pinned to %q, want the only ready instance %s", i, dest, ep[3])
				}
			}
			// The router's own checks cannot bring back what xDS calls unhealthy.
			p.Health(ep[2], true)
			waitStates(t, p, after...)

			// A hostname is refused; the last list stays.
			cp.set(t, "router-1", "model_servers", "vllm.svc:8000")
			time.Sleep(300 * time.Millisecond)
			waitStates(t, p, after...)

			// The server goes away: the list stays; readiness fails after the grace.
			cp.g.Stop()
			deadline := time.Now().Add(10 * time.Second)
			for ts.srv.Ready() == nil {
				if time.Now().After(deadline) {
					t.Fatal("Ready() still nil 10s after the management server stopped")
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := ts.srv.Ready(); !strings.Contains(err.Error(), "xds management server unreachable") {
				t.Errorf("Ready() = %v, want it to name the management server", err)
			}
			if n := testutil.ToFloat64(gauge(t, ts, "dualmap_xds_connected")); n != 0 {
				t.Errorf("dualmap_xds_connected = %v with the server gone, want 0", n)
			}
			waitStates(t, p, after...)
		})
	}
}

// gauge is the metric called name, of the only pool that has it.
func gauge(t *testing.T, ts *testServer, name string) prometheus.Collector {
	t.Helper()
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			v := mf.GetMetric()[0].GetGauge().GetValue()
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: name}, func() float64 { return v })
		}
	}
	t.Fatalf("metric %s not registered", name)
	return nil
}
