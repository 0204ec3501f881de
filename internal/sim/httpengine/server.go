package httpengine

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dualmap/dualmap/internal/sim/engine"
	"github.com/dualmap/dualmap/internal/tokenize"
)

// maxBodyBytes bounds a request body; larger ones get the parser's 413.
const maxBodyBytes = 32 << 20

// Server is one simulated model server. Create it with New, serve Handler
// (through Listener to honour SetRefuse) and drive it with Run. Its
// methods are safe for concurrent use.
type Server struct {
	opt      Options
	eng      *engine.Engine // owned by Run
	prompter *tokenize.Prompter
	metrics  *metrics
	handler  http.Handler
	created  int64 // Unix seconds at New, for /v1/models

	maxModelLen int // the engine's, for /v1/models

	submit  chan *ticket
	stopped chan struct{} // closed when Run returns
	started atomic.Bool
	nextID  atomic.Int64

	prefillLegs atomic.Int64 // requests with do_remote_decode (pd.go)
	kvReceived  atomic.Int64 // prompt tokens received by KV transfer (pd.go)

	faults faultState
	refuse atomic.Bool
	conns  connSet // accepted through Listener

	lmu       sync.Mutex // guards listeners; serialises SetFaults
	listeners []*listener

	mu   sync.Mutex
	snap Snapshot
}

// Snapshot is the engine's state as of the last step Run processed.
type Snapshot struct {
	SimTime              float64 // simulated seconds since Run started
	Waiting              int     // requests in the engine's waiting queue
	Running              int     // requests admitted and not completed
	InFlight             int     // requests submitted and not completed, including those whose client left
	PendingPrefillTokens int     // see engine.Engine.PendingPrefillTokens
	CacheUsage           float64 // fraction of the prefix cache in use, 0 to 1
	GenerationTokens     int64   // output tokens generated so far
	Engine               engine.Stats
}

// New returns a server for opt (zero fields take their defaults), or an
// error naming every invalid option.
func New(opt Options) (*Server, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(opt.Profile)
	if err != nil {
		return nil, fmt.Errorf("httpengine: %w", err)
	}
	pr, err := tokenize.NewPrompter(tokenize.Bytes(), tokenize.Config{BlockSize: opt.BlockSize})
	if err != nil {
		return nil, fmt.Errorf("httpengine: %w", err)
	}
	s := &Server{
		opt:      opt,
		eng:      eng,
		prompter: pr,
		created:  time.Now().Unix(),

		maxModelLen: eng.Profile().MaxModelLen,
		submit:      make(chan *ticket),
		stopped:     make(chan struct{}),
	}
	s.faults.seed = opt.Seed
	s.faults.f = Faults{ErrorRate: opt.ErrorRate, AddedLatency: opt.AddedLatency}
	s.metrics = newMetrics(s)
	s.handler = s.routes()
	return s, nil
}

// Handler returns the HTTP handler of every endpoint.
func (s *Server) Handler() http.Handler { return s.handler }

// Options returns the options in force, defaults filled in.
func (s *Server) Options() Options { return s.opt }

// Snapshot returns the engine's state as of Run's last step; the zero
// Snapshot before Run has done anything.
func (s *Server) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap
}

func (s *Server) setSnapshot(v Snapshot) {
	s.mu.Lock()
	s.snap = v
	s.mu.Unlock()
}

// Response headers the engine sets.
const (
	// HeaderName names the engine (Options.Name).
	HeaderName = "x-engine-name"
	// HeaderDestination repeats the request's DestinationHeader, when it
	// had one: the endpoints a router chose for it, first the primary,
	// then any fallback. With HeaderName it tells a test whether the
	// request was served by the primary, by the fallback after a
	// failover, or by neither.
	HeaderDestination = "x-engine-destination"
	// HeaderBodyDigest and HeaderBodyBytes, on inference answers: the
	// SHA-256 (hex) and length of the request body the engine received,
	// so a test can tell that a proxy passed a body on unchanged.
	HeaderBodyDigest = "x-engine-body-sha256"
	HeaderBodyBytes  = "x-engine-body-bytes"
)

// DestinationHeader is the request header by which a router (through
// Envoy) names the chosen endpoints: "IP:port[,IP:port...]".
const DestinationHeader = "x-gateway-destination-endpoint"

// routes builds the mux, wrapped so that every response carries HeaderName
// (and HeaderDestination when the request named its destination) and,
// except /admin/fault, waits the added latency first.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.serveInference)
	mux.HandleFunc("POST /v1/completions", s.serveInference)
	mux.HandleFunc("GET /v1/models", s.serveModels)
	mux.HandleFunc("GET /health", s.serveHealth)
	mux.Handle("GET /metrics", s.metrics.handler)
	mux.HandleFunc("GET /admin/fault", s.serveFault)
	mux.HandleFunc("POST /admin/fault", s.serveFault)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(HeaderName, s.opt.Name)
		if d := r.Header.Get(DestinationHeader); d != "" {
			w.Header().Set(HeaderDestination, d)
		}
		if r.URL.Path != "/admin/fault" {
			if d := s.Faults().AddedLatency; d > 0 && !sleep(r.Context(), d) {
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// enqueue hands t to Run; false if ctx ended or Run stopped first.
func (s *Server) enqueue(ctx context.Context, t *ticket) bool {
	select {
	case s.submit <- t:
		return true
	case <-ctx.Done():
	case <-s.stopped:
	}
	return false
}

// await waits for news of t; false if ctx ended or Run stopped first.
func (s *Server) await(ctx context.Context, t *ticket) bool {
	select {
	case <-t.notify:
		return true
	case <-ctx.Done():
	case <-s.stopped:
	}
	return false
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
