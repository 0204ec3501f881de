// Package epphealth serves the gRPC health services a gateway expects of
// an endpoint picker: "liveness" (SERVING while the process runs),
// "readiness", "" (overall) and "envoy.service.ext_proc.v3.ExternalProcessor"
// (SERVING while the readiness check passes), and services of the
// caller's own that follow checks of their own (Follow). It polls the
// checks and changes a status only when it flips, so Watch streams see
// each change once.
package epphealth

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The service names.
const (
	Liveness  = "liveness"
	Readiness = "readiness"
	ExtProc   = "envoy.service.ext_proc.v3.ExternalProcessor"
	Overall   = ""
)

// State is SERVING while the router's shared state is synced (Redis
// answers); it is no part of readiness, since a replica routes on its own
// view during an outage.
const State = "dualmap.state"

// readinessServices follow the readiness check.
var readinessServices = []string{Readiness, ExtProc, Overall}

// DefaultInterval is how often Run asks the readiness check.
const DefaultInterval = 250 * time.Millisecond

// Reporter owns a grpc health server and keeps it in line with a readiness
// check (and the checks of Follow).
type Reporter struct {
	hs       *health.Server
	interval time.Duration
	log      *slog.Logger
	checks   []*check // readiness first
}

// check is one check and the services that follow it.
type check struct {
	services []string
	f        func() error
	what     string // for the log: "not ready", or the service's name
	last     error
	known    bool
}

// New returns a Reporter for check (nil error: ready), polled every
// interval (DefaultInterval when 0). Liveness is SERVING from the start;
// the readiness services follow the check's first answer.
func New(check func() error, interval time.Duration, log *slog.Logger) *Reporter {
	if interval <= 0 {
		interval = DefaultInterval
	}
	r := &Reporter{hs: health.NewServer(), interval: interval, log: log}
	r.hs.SetServingStatus(Liveness, healthpb.HealthCheckResponse_SERVING)
	r.Follow("", check, readinessServices...)
	return r
}

// Follow sets services SERVING while f returns nil, from its first answer
// on (name is what the log calls a change; "" for readiness). Call it
// before Run.
func (r *Reporter) Follow(name string, f func() error, services ...string) {
	c := &check{services: services, f: f, what: name}
	r.checks = append(r.checks, c)
	r.update(c)
}

// Server is the health service to register on gRPC servers.
func (r *Reporter) Server() *health.Server { return r.hs }

// Run polls the readiness check until ctx ends.
func (r *Reporter) Run(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, c := range r.checks {
				r.update(c)
			}
		}
	}
}

// update sets c's services from one call of its check, when their status
// changes. Only New, Follow and Run call it, never at once.
func (r *Reporter) update(c *check) {
	err := c.f()
	if c.known && (err == nil) == (c.last == nil) {
		c.last = err
		return
	}
	st := healthpb.HealthCheckResponse_SERVING
	switch {
	case err != nil:
		st = healthpb.HealthCheckResponse_NOT_SERVING
		if r.log != nil && c.what == "" {
			r.log.Warn("not ready", "reason", err.Error())
		} else if r.log != nil {
			r.log.Warn("health service not serving", "service", c.what, "reason", err.Error())
		}
	case c.known && r.log != nil && c.what == "":
		r.log.Info("ready again")
	case c.known && r.log != nil:
		r.log.Info("health service serving again", "service", c.what)
	}
	for _, svc := range c.services {
		r.hs.SetServingStatus(svc, st)
	}
	c.last, c.known = err, true
}

// Shutdown sets every service NOT_SERVING for good (the process is
// stopping): gateways stop sending new streams while open ones finish.
func (r *Reporter) Shutdown() { r.hs.Shutdown() }
