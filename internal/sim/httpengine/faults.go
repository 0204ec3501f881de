package httpengine

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dualmap/dualmap/internal/hashing"
)

// Faults are the failures a Server injects, changeable at run time.
type Faults struct {
	// ErrorRate is the fraction of inference requests answered 500, 0 to 1.
	ErrorRate float64
	// AddedLatency is a wall delay before every response except
	// /admin/fault's; >= 0.
	AddedLatency time.Duration
	// Down makes GET /health answer 503 (requests are still served).
	Down bool
	// RefuseInference makes the engine refuse inference at the connection
	// level while it still answers its health check: the sockets of
	// Listener are closed, so connecting fails (connection refused);
	// connections that carried an inference request are reset, requests
	// in flight on them included; an inference request on any other
	// connection has that connection reset instead of an answer. Other
	// requests on connections already open are answered as usual, so a
	// health checker that keeps its connection open (as net/http clients
	// do) still sees 200, and so does POST /admin/fault, the way to lift
	// the fault. Lifting it listens again on the same addresses.
	RefuseInference bool
}

func (f Faults) validate() error {
	var errs []error
	if !(f.ErrorRate >= 0 && f.ErrorRate <= 1) {
		errs = append(errs, fmt.Errorf("httpengine: error rate must be in [0, 1], got %g", f.ErrorRate))
	}
	if f.AddedLatency < 0 {
		errs = append(errs, fmt.Errorf("httpengine: added latency must be >= 0, got %v", f.AddedLatency))
	}
	return errors.Join(errs...)
}

// faultState holds the current Faults and draws the failed requests.
type faultState struct {
	mu   sync.Mutex
	f    Faults
	seed uint64
	n    atomic.Uint64 // inference requests drawn so far
}

func (s *faultState) get() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.f
}

func (s *faultState) set(f Faults) {
	s.mu.Lock()
	s.f = f
	s.mu.Unlock()
}

// fail draws whether the next inference request is answered 500: the i-th
// draw fails when a hash of (seed, i), as a number in [0, 1), is below the
// error rate, so the sequence is fixed by the seed.
func (s *faultState) fail() bool {
	rate := s.get().ErrorRate
	i := s.n.Add(1)
	u := float64(hashing.SplitMix64(s.seed^(i*hashing.Golden))>>11) / (1 << 53)
	return u < rate
}

// Faults returns the faults in force.
func (s *Server) Faults() Faults { return s.faults.get() }

// SetFaults replaces the faults in force; it rejects an error rate outside
// [0, 1] or a negative latency and then changes nothing. Turning
// RefuseInference off fails, leaving it on, if a socket cannot listen on
// its address again.
func (s *Server) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.lmu.Lock()
	defer s.lmu.Unlock()
	was := s.faults.get().RefuseInference
	switch {
	case f.RefuseInference && !was:
		s.faults.set(f) // inference arriving from now on is refused
		for _, l := range s.listeners {
			l.pause()
		}
		s.conns.resetInference()
	case !f.RefuseInference && was:
		var errs []error
		for _, l := range s.listeners {
			errs = append(errs, l.resume())
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		s.faults.set(f)
	default:
		s.faults.set(f)
	}
	return nil
}

// abortIfRefused is called first by the inference handlers. It marks the
// request's connection as one that carried inference (before reading the
// fault, so that SetFaults, which sets the fault before resetting marked
// connections, misses no request in flight); then, while RefuseInference
// is on, it resets the connection and aborts the handler by panicking with
// http.ErrAbortHandler, so the client gets no answer.
func (s *Server) abortIfRefused(r *http.Request) {
	s.conns.markInference(r.RemoteAddr)
	if s.Faults().RefuseInference {
		s.conns.reset(r.RemoteAddr)
		panic(http.ErrAbortHandler)
	}
}

// faultJSON is the body of /admin/fault, both ways. In a request, absent
// fields keep their current values.
type faultJSON struct {
	ErrorRate       *float64 `json:"error_rate"`
	AddedLatencyMS  *float64 `json:"added_latency_ms"`
	Down            *bool    `json:"down"`
	RefuseInference *bool    `json:"refuse_inference"`
}

// serveFault handles POST /admin/fault: it applies the given fields and
// answers the faults now in force; GET /admin/fault only answers them.
func (s *Server) serveFault(w http.ResponseWriter, r *http.Request) {
	f := s.Faults()
	if r.Method == http.MethodPost {
		var in faultJSON
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("bad fault body: %v", err))
			return
		}
		if in.ErrorRate != nil {
			f.ErrorRate = *in.ErrorRate
		}
		if in.AddedLatencyMS != nil {
			ms := *in.AddedLatencyMS
			if math.IsNaN(ms) || math.IsInf(ms, 0) || ms > float64(math.MaxInt64/int64(time.Millisecond)) {
				writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("bad added_latency_ms %g", ms))
				return
			}
			f.AddedLatency = time.Duration(ms * float64(time.Millisecond))
		}
		if in.Down != nil {
			f.Down = *in.Down
		}
		if in.RefuseInference != nil {
			f.RefuseInference = *in.RefuseInference
		}
		if err := f.validate(); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
			return
		}
		if err := s.SetFaults(f); err != nil {
			writeError(w, http.StatusInternalServerError, "server_error", err.Error())
			return
		}
	}
	rate, ms := f.ErrorRate, float64(f.AddedLatency)/float64(time.Millisecond)
	writeJSON(w, http.StatusOK, faultJSON{ErrorRate: &rate, AddedLatencyMS: &ms, Down: &f.Down, RefuseInference: &f.RefuseInference})
}
