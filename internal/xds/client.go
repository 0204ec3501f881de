// Package xds takes a cluster's endpoints from an xDS management server
// (Istio, Envoy Gateway, a go-control-plane server): a state-of-the-world
// EDS subscription over gRPC, through ADS or the endpoint discovery
// service, that acknowledges every response it applies and refuses (NACKs)
// every one it cannot, with the reason. It reconnects with backoff and
// keeps the last good list while the server is away. It is for the router's
// pools; it routes nothing and holds no scheduler state.
package xds

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Options configure a Client. Zero values mean defaults.
type Options struct {
	Address     string      // the management server, host:port
	TLS         *tls.Config // nil: plaintext
	API         string      // "ads" (default) or "eds"
	Cluster     string      // the cluster whose assignment to take
	NodeID      string      // default "dualmap"
	NodeCluster string      // default "dualmap"
	// MaxEndpoints bounds one assignment (default 4096).
	MaxEndpoints int
	// MaxMessageBytes bounds one response (default 16 MiB).
	MaxMessageBytes int
	// Backoff is the first wait before reconnecting, doubling (with
	// jitter) up to MaxBackoff (defaults 500ms and 30s).
	Backoff, MaxBackoff time.Duration
	Logger              *slog.Logger     // default: discard
	Now                 func() time.Time // default time.Now
}

// Client is one subscription. Create it with New, run it with Run; Since
// may be called concurrently with Run.
type Client struct {
	opt  Options
	conn *grpc.ClientConn
	log  *slog.Logger

	mu      sync.Mutex // guards up, since, version
	up      bool       // a stream is open
	since   time.Time  // when up last changed (or the client was made)
	version string     // the version last applied
}

// ApplyFunc makes eps the cluster's endpoints; an error refuses (NACKs)
// the response, and the previous list stays.
type ApplyFunc func(eps []Endpoint) error

// New returns a client for opt; it connects in Run.
func New(opt Options) (*Client, error) {
	if opt.Address == "" || opt.Cluster == "" {
		return nil, errors.New("xds: address and cluster are required")
	}
	if opt.API == "" {
		opt.API = "ads"
	}
	if opt.API != "ads" && opt.API != "eds" {
		return nil, fmt.Errorf("xds: api %q is not ads or eds", opt.API)
	}
	if opt.NodeID == "" {
		opt.NodeID = "dualmap"
	}
	if opt.NodeCluster == "" {
		opt.NodeCluster = "dualmap"
	}
	if opt.MaxEndpoints <= 0 {
		opt.MaxEndpoints = 4096
	}
	if opt.MaxMessageBytes <= 0 {
		opt.MaxMessageBytes = 16 << 20
	}
	if opt.Backoff <= 0 {
		opt.Backoff = 500 * time.Millisecond
	}
	if opt.MaxBackoff < opt.Backoff {
		opt.MaxBackoff = max(30*time.Second, opt.Backoff)
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	creds := insecure.NewCredentials()
	if opt.TLS != nil {
		creds = credentials.NewTLS(opt.TLS)
	}
	conn, err := grpc.NewClient(opt.Address, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(opt.MaxMessageBytes)))
	if err != nil {
		return nil, fmt.Errorf("xds: %w", err)
	}
	return &Client{opt: opt, conn: conn, log: opt.Logger.With("xds", opt.Address, "cluster", opt.Cluster), since: opt.Now()}, nil
}

// Close closes the connection. Call it after Run has returned.
func (c *Client) Close() error { return c.conn.Close() }

// Since reports whether a stream to the server is open, and since when
// that has been so (or, before the first stream, since New).
func (c *Client) Since() (up bool, since time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up, c.since
}

func (c *Client) setUp(up bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.up != up {
		c.up, c.since = up, c.opt.Now()
	}
}

// Run subscribes until ctx ends, calling apply (from this goroutine) with
// every valid assignment of the cluster. A broken stream is reopened
// after a backoff that doubles up to MaxBackoff and starts over once a
// stream has delivered a response.
func (c *Client) Run(ctx context.Context, apply ApplyFunc) {
	backoff := c.opt.Backoff
	for {
		got, err := c.stream(ctx, apply)
		c.setUp(false)
		if ctx.Err() != nil {
			return
		}
		if got {
			backoff = c.opt.Backoff
		}
		wait := backoff/2 + rand.N(backoff/2+1) // jitter: replicas do not reconnect in step
		c.log.Warn("xds stream ended; keeping the last endpoints and reconnecting", "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(2*backoff, c.opt.MaxBackoff)
	}
}

type discoveryStream interface {
	Send(*discoveryv3.DiscoveryRequest) error
	Recv() (*discoveryv3.DiscoveryResponse, error)
}

// stream runs one stream until it breaks; got reports whether it
// delivered any response.
func (c *Client) stream(ctx context.Context, apply ApplyFunc) (got bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var s discoveryStream
	if c.opt.API == "eds" {
		s, err = endpointservice.NewEndpointDiscoveryServiceClient(c.conn).StreamEndpoints(ctx)
	} else {
		s, err = discoveryv3.NewAggregatedDiscoveryServiceClient(c.conn).StreamAggregatedResources(ctx)
	}
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	version := c.version
	c.mu.Unlock()
	// The first request carries the version last applied, so a server
	// that still has it need not send it again.
	if err := s.Send(c.request(version, "", nil)); err != nil {
		return false, err
	}
	c.setUp(true)
	for {
		resp, err := s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("server closed the stream")
			}
			return got, err
		}
		got = true
		var detail *statuspb.Status
		eps, found, err := decode(resp, c.opt.Cluster, c.opt.MaxEndpoints)
		if err == nil && found {
			err = apply(eps)
		}
		if err != nil {
			c.log.Error("xds response refused (NACK); keeping the last endpoints", "version", bound(resp.GetVersionInfo()), "error", err)
			detail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: bound(err.Error())}
		} else {
			version = resp.GetVersionInfo()
			c.mu.Lock()
			c.version = version
			c.mu.Unlock()
			if found {
				c.log.Info("xds endpoints applied", "version", bound(version), "endpoints", len(eps))
			}
		}
		// ACK: the response's version; NACK: the last version applied,
		// with the reason. Both carry the response's nonce.
		if err := s.Send(c.request(version, resp.GetNonce(), detail)); err != nil {
			return got, err
		}
	}
}

func (c *Client) request(version, nonce string, detail *statuspb.Status) *discoveryv3.DiscoveryRequest {
	return &discoveryv3.DiscoveryRequest{
		VersionInfo:   version,
		Node:          &corev3.Node{Id: c.opt.NodeID, Cluster: c.opt.NodeCluster, UserAgentName: "dualmap"},
		ResourceNames: []string{c.opt.Cluster},
		TypeUrl:       EndpointType,
		ResponseNonce: nonce,
		ErrorDetail:   detail,
	}
}
