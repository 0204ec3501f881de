package extproc

// setHealthy marks instance id of pool p up or down at once, as the health
// checks would, for tests that need a pool without healthy instances.
func (s *Server) setHealthy(p *pool, id string, ok bool) {
	s.background(func() {
		if err := p.members.SetHealthy(id, ok); err != nil {
			s.log.Debug("health change for an instance no longer in the pool", "pool", p.name, "instance", id)
		}
	})
}
