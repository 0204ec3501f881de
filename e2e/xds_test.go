//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
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
	"google.golang.org/grpc"
)

// xdsServer is a management server built on go-control-plane's server and
// snapshot cache, on loopback: the same EDS snapshot for every node.
type xdsServer struct {
	cache cachev3.SnapshotCache
	port  int
	nodes []string
	ver   int
}

func startXDS(t *testing.T, nodes ...string) *xdsServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x := &xdsServer{cache: cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil), port: lis.Addr().(*net.TCPAddr).Port, nodes: nodes}
	ctx, cancel := context.WithCancel(context.Background())
	srv := serverv3.NewServer(ctx, x.cache, nil)
	g := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, srv)
	endpointservice.RegisterEndpointDiscoveryServiceServer(g, srv)
	go g.Serve(lis)
	t.Cleanup(func() { g.Stop(); cancel() })
	return x
}

// set publishes addrs (IP:port) as the endpoints of model_servers.
func (x *xdsServer) set(t *testing.T, addrs ...string) {
	t.Helper()
	x.ver++
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: "model_servers", Endpoints: []*endpointv3.LocalityLbEndpoints{{}}}
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		var p uint32
		fmt.Sscan(port, &p)
		cla.Endpoints[0].LbEndpoints = append(cla.Endpoints[0].LbEndpoints, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
				Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: host,
					PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p}}}}}}})
	}
	snap, err := cachev3.NewSnapshot(fmt.Sprint(x.ver), map[resource.Type][]types.Resource{resource.EndpointType: {cla}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range x.nodes {
		if err := x.cache.SetSnapshot(context.Background(), n, snap); err != nil {
			t.Fatal(err)
		}
	}
}

// sample is one request of the traffic loop.
type xdsSample struct {
	at time.Time
	r  reply
}

// Envoy (ADS) and dualmap (EDS) take the model servers from one
// go-control-plane management server: an endpoint added to the snapshot
// gets requests from both within seconds, one removed stops getting them,
// and no request fails meanwhile other than one shed with a status.
func TestXDSEndpointsThroughEnvoyAndRouter(t *testing.T) {
	x := startXDS(t, "envoy-front", "dualmap")
	var e []string
	s := startStack(t, stackOptions{
		envoyConfig:   "front-proxy-xds.yaml",
		beforeRouters: func(addrs []string) { e = addrs; x.set(t, addrs[0], addrs[1]) },
		pools: func([]string) string {
			return fmt.Sprintf("pools:\n  - block_size: 16\n    xds: {address: \"127.0.0.1:%d\", cluster: model_servers, api: eds, node_id: dualmap, grace: 2s}\n", x.port)
		},
		renderEnvoy: func(c string) string {
			return strings.ReplaceAll(c, "port_value: 18000", fmt.Sprintf("port_value: %d", x.port))
		},
	})

	var mu sync.Mutex
	var samples []xdsSample
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				at := time.Now()
				r := s.post("/v1/chat/completions", chatBody(fmt.Sprintf("Worker %d conversation %d. %s", w, i, systemPrompt[:400]), "hi", false, 2))
				mu.Lock()
				samples = append(samples, xdsSample{at: at, r: r})
				mu.Unlock()
			}
		}()
	}
	// waitFor polls the samples started after since until cond holds for one.
	waitFor := func(what string, since time.Time, cond func(reply) bool) time.Duration {
		t.Helper()
		deadline := since.Add(faultWait)
		for time.Now().Before(deadline) {
			mu.Lock()
			for _, sm := range samples {
				if sm.at.After(since) && cond(sm.r) {
					mu.Unlock()
					return sm.at.Sub(since)
				}
			}
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: not within 15s", what)
		return 0
	}
	used := func(from, to time.Time) map[string]int {
		mu.Lock()
		defer mu.Unlock()
		m := map[string]int{}
		for _, sm := range samples {
			if sm.at.After(from) && sm.at.Before(to) && sm.r.status == 200 {
				m["decided "+sm.r.instance]++
				m["served "+sm.r.engine]++
			}
		}
		return m
	}

	// At least 2s of traffic, and (bounded) until the endpoint to remove
	// has had requests, so the removal below is certain to be observable.
	start := time.Now()
	time.Sleep(2 * time.Second)
	waitLoad(func() bool {
		b := used(start, time.Now())
		return b["decided "+e[0]] > 0 && b["served "+e[0]] > 0
	})
	before := used(start, time.Now())
	for k := range before {
		if strings.HasSuffix(k, e[2]) || strings.HasSuffix(k, e[3]) {
			t.Fatalf("before any change: %s, which is not in the snapshot", k)
		}
	}
	if before["decided "+e[0]] == 0 || before["served "+e[0]] == 0 {
		t.Fatalf("before any change: %v, want requests on %s (the endpoint to remove)", before, e[0])
	}

	added := time.Now()
	x.set(t, e[0], e[1], e[2])
	took := waitFor("the added endpoint decided by dualmap and served through Envoy", added, func(r reply) bool {
		return r.status == 200 && r.instance == e[2] && r.engine == e[2]
	})
	t.Logf("endpoint %s added: first request decided and served there %v after the snapshot", e[2], took.Round(time.Millisecond))

	removed := time.Now()
	x.set(t, e[1], e[2])
	// The removal is in effect once 2s of traffic pass without e[0].
	var quietFrom time.Time
	deadline := removed.Add(faultWait)
	for {
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		last := removed
		for _, sm := range samples {
			if sm.at.After(last) && (sm.r.instance == e[0] || sm.r.engine == e[0]) {
				last = sm.at
			}
		}
		mu.Unlock()
		if time.Since(last) > 2*time.Second {
			quietFrom = last
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint %s removed: still getting requests %v later", e[0], faultWait)
		}
	}
	t.Logf("endpoint %s removed: last request there %v after the snapshot", e[0], quietFrom.Sub(removed).Round(time.Millisecond))
	after := used(quietFrom, time.Now())
	close(stop)
	wg.Wait()

	if after["decided "+e[1]] == 0 || after["decided "+e[2]] == 0 {
		t.Errorf("after the changes: %v, want requests on %s and %s", after, e[1], e[2])
	}
	failed, shed, mismatched := 0, 0, 0
	for _, sm := range samples {
		switch {
		case sm.r.err != nil || (sm.r.status != 200 && sm.r.status != 429 && sm.r.status != 503):
			failed++
			if failed <= 5 {
				t.Errorf("failed request at %v: %v", sm.at.Sub(start).Round(time.Millisecond), sm.r)
			}
		case sm.r.status != 200:
			shed++
		case sm.r.instance != sm.r.engine:
			mismatched++
		}
	}
	t.Logf("%d requests: %d failed, %d shed with a status, %d served elsewhere than decided (while Envoy and dualmap disagreed)", len(samples), failed, shed, mismatched)
}
