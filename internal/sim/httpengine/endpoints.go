package httpengine

import "net/http"

// serveHealth answers GET /health: 200 with an empty body, as vLLM does,
// or 503 while the down fault or SetRefuse is on.
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	if s.Faults().Down || s.refuse.Load() {
		writeError(w, http.StatusServiceUnavailable, "server_error", "engine is down")
		return
	}
	w.WriteHeader(http.StatusOK)
}

// serveModels answers GET /v1/models with an OpenAI model list holding the
// configured model.
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		Created     int64  `json:"created"`
		OwnedBy     string `json:"owned_by"`
		Root        string `json:"root"`
		MaxModelLen int    `json:"max_model_len"`
	}
	type list struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}
	m := model{ID: s.opt.Model, Object: "model", Created: s.created, OwnedBy: "dualmap", Root: s.opt.Model, MaxModelLen: s.maxModelLen}
	writeJSON(w, http.StatusOK, list{Object: "list", Data: []model{m}})
}
