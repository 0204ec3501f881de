package extproc

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminHandler serves /healthz (the process is up), /readyz (every pool has
// a ready instance, and every pool from xDS has reached its management
// server within pools[].xds.grace; 200 with a "degraded:" line while
// shared state is not synced, which delays agreement, not requests), /metrics (Prometheus, from g) and /debug/instances
// (each pool's instances as the scheduler sees them, JSON).
func (s *Server) AdminHandler(g prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
		if err := s.StateSynced(); err != nil {
			w.Write([]byte("degraded: " + err.Error() + "\n")) // ready all the same
		}
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /debug/instances", func(w http.ResponseWriter, r *http.Request) {
		out := map[string]any{}
		for _, p := range s.pools.Pools() {
			out[p.Name()] = debugInstances(p) // pd.go: with roles in a P/D pool
		}
		w.Header().Set("content-type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
	return mux
}
