package extproc

import "fmt"

// Readiness is what a gateway's readiness check asks of an endpoint
// picker: every pool has a ready instance (Ready) and, with Redis state,
// every pool's shared state is synced (Redis answered the last
// operations; false before the first success and during an outage).
func (s *Server) Readiness() error {
	if err := s.Ready(); err != nil {
		return err
	}
	for _, p := range s.pools {
		if p.shared && !p.store.Stats().Up {
			return fmt.Errorf("pool %s: shared state not synced (redis unreachable)", p.name)
		}
	}
	return nil
}
