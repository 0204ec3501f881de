// Package epphealth serves the gRPC health services a gateway expects of
// an endpoint picker: "liveness" (SERVING while the process runs),
// "readiness", "" (overall) and "envoy.service.ext_proc.v3.ExternalProcessor"
// (SERVING while the readiness check passes). It polls the check and
// changes a status only when it flips, so Watch streams see each change
// once.
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

// readinessServices follow the readiness check.
var readinessServices = []string{Readiness, ExtProc, Overall}

// DefaultInterval is how often Run asks the readiness check.
const DefaultInterval = 250 * time.Millisecond

// Reporter owns a grpc health server and keeps it in line with a readiness
// check.
type Reporter struct {
	hs       *health.Server
	ready    func() error
	interval time.Duration
	log      *slog.Logger
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
	r := &Reporter{hs: health.NewServer(), ready: check, interval: interval, log: log}
	r.hs.SetServingStatus(Liveness, healthpb.HealthCheckResponse_SERVING)
	r.update()
	return r
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
			r.update()
		}
	}
}

// update sets the readiness services from one call of the check, when
// their status changes. Only New and Run call it, never at once.
func (r *Reporter) update() {
	err := r.ready()
	if r.known && (err == nil) == (r.last == nil) {
		r.last = err
		return
	}
	st := healthpb.HealthCheckResponse_SERVING
	if err != nil {
		st = healthpb.HealthCheckResponse_NOT_SERVING
		if r.log != nil {
			r.log.Warn("not ready", "reason", err.Error())
		}
	} else if r.known && r.log != nil {
		r.log.Info("ready again")
	}
	for _, svc := range readinessServices {
		r.hs.SetServingStatus(svc, st)
	}
	r.last, r.known = err, true
}

// Shutdown sets every service NOT_SERVING for good (the process is
// stopping): gateways stop sending new streams while open ones finish.
func (r *Reporter) Shutdown() { r.hs.Shutdown() }
