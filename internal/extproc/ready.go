package extproc

import "fmt"

// Readiness is what a gateway's readiness check asks of an endpoint
// picker: every pool has a ready instance (Ready). Shared state is not
// part of it: during a Redis outage a replica routes on its own view
// (agreement between replicas is delayed, no request is), so a gateway
// that fails closed must keep sending it requests. StateSynced reports
// Redis on its own.
func (s *Server) Readiness() error { return s.Ready() }

// StateSynced reports whether every pool with shared state is synced
// (Redis answered the last operations; not before the first success and
// not during an outage). Nil without shared state.
func (s *Server) StateSynced() error {
	for _, p := range s.pools {
		if p.shared && !p.store.Stats().Up {
			return fmt.Errorf("pool %s: shared state not synced (redis unreachable); routing on the local view", p.name)
		}
	}
	return nil
}
