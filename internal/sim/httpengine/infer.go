package httpengine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/sim/engine"
	"github.com/dualmap/dualmap/internal/tokenize"
)

// serveInference handles POST /v1/chat/completions and /v1/completions:
// refuse it outright under the RefuseInference fault, parse (the parser's errors go back as they are), maybe fail on purpose,
// tokenize the prompt as the router does, submit it to the engine and
// answer when it is done, or stream it as it goes.
func (s *Server) serveInference(w http.ResponseWriter, r *http.Request) {
	s.abortIfRefused(r)
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "reading the body: "+err.Error())
		return
	}
	sum := sha256.Sum256(raw)
	w.Header().Set(HeaderBodyDigest, hex.EncodeToString(sum[:]))
	w.Header().Set(HeaderBodyBytes, strconv.Itoa(len(raw)))
	req, err := openai.Parse(r.Method, r.URL.Path, r.Header.Get("Content-Type"), raw, openai.Limits{MaxBodyBytes: maxBodyBytes})
	if err != nil {
		writeParseError(w, err)
		return
	}
	if req.Kind != openai.KindChat && req.Kind != openai.KindCompletion {
		writeError(w, http.StatusNotFound, openai.TypeInvalidRequest, "not an inference path: "+r.URL.Path)
		return
	}
	ext, err := parseExtras(raw)
	if err == nil {
		err = checkPD(ext.KV, req.Stream)
	}
	if err != nil {
		writeParseError(w, err)
		return
	}
	if s.faults.fail() {
		writeError(w, http.StatusInternalServerError, "server_error", "injected fault: internal error")
		return
	}
	var prompt tokenize.Prompt
	err = s.tokenize(req, &prompt)
	sp := s.startSpan(r, req, prompt.Tokens)
	defer sp.end()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	n, finish := outputTokens(s.opt.OutputTokens, req.MaxTokens, ext.IgnoreEOS)
	id := s.nextID.Add(1)
	rep := &reply{
		id:           newID(req.Kind == openai.KindChat, s.opt.Name, id),
		chat:         req.Kind == openai.KindChat,
		created:      time.Now().Unix(),
		model:        req.Model,
		output:       n,
		finish:       finish,
		includeUsage: ext.StreamOptions != nil && ext.StreamOptions.IncludeUsage,
	}
	t := newTicket(&engine.Request{ID: id, Blocks: prompt.Blocks, Tokens: prompt.Tokens, Output: n})
	if s.opt.KVEvents != nil { // the engine's own tokens key its cache and its events
		t.tokens = engineTokens(req)
		t.req.Blocks, t.req.Tokens = tokenize.Blocks(t.tokens, s.opt.BlockSize, nil), max(len(t.tokens), 1)
	}
	// The P/D legs name the blocks as the engine's cache keys them.
	if ext.KV != nil && ext.KV.DoRemoteDecode {
		rep.kv = s.prefillAnswer(t.req.Blocks)
		s.prefillLegs.Add(1)
	}
	if t.received = received(ext.KV, t.req.Blocks); len(t.received) > 0 {
		tokens := min(len(t.received)*s.opt.BlockSize, t.req.Tokens)
		if !sleep(r.Context(), s.transferWait(tokens)) {
			return
		}
		s.kvReceived.Add(int64(tokens))
	}
	if !s.enqueue(r.Context(), t) {
		writeError(w, http.StatusServiceUnavailable, "server_error", "engine stopped")
		return
	}
	if req.Stream {
		s.stream(w, r, t, rep)
		return
	}
	s.respond(w, r, t, rep)
}

// respond waits for the request to complete and writes the whole answer.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, t *ticket, rep *reply) {
	for {
		if p := t.load(); p.Done {
			writeJSON(w, http.StatusOK, rep.whole(p))
			return
		}
		if !s.await(r.Context(), t) {
			writeError(w, http.StatusServiceUnavailable, "server_error", "engine stopped")
			return
		}
	}
}

// tokenize computes the prompt exactly as the router does: the messages of
// a chat, else the first prompt of a completion.
func (s *Server) tokenize(req *openai.Request, dst *tokenize.Prompt) error {
	var err error
	if len(req.Messages) > 0 {
		msgs := make([]tokenize.Message, len(req.Messages))
		for i, m := range req.Messages {
			msgs[i] = tokenize.Message{Role: m.Role, Content: m.Content}
		}
		err = s.prompter.Messages(msgs, dst)
	} else if len(req.Prompts) > 0 {
		err = s.prompter.Text(req.Prompts[0], dst)
	}
	if err != nil {
		return fmt.Errorf("httpengine: tokenize: %w", err)
	}
	return nil
}

// outputTokens returns how many tokens to generate and the finish reason:
// def, lowered to maxTokens when that is set and lower ("length"); with
// ignoreEOS and maxTokens set, exactly maxTokens ("length").
func outputTokens(def, maxTokens int, ignoreEOS bool) (int, string) {
	if maxTokens > 0 && (ignoreEOS || maxTokens <= def) {
		return maxTokens, "length"
	}
	return def, "stop"
}

// extras are the request fields the engine reads that the router's parser
// does not.
type extras struct {
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	IgnoreEOS bool `json:"ignore_eos"`
	// KV is a prefill/decode leg's kv_transfer_params (pd.go).
	KV *kvParams `json:"kv_transfer_params"`
}

// parseExtras reads extras from a body openai.Parse accepted; a field of
// the wrong type is an *openai.Error naming it.
func parseExtras(raw []byte) (extras, error) {
	var ext extras
	if err := json.Unmarshal(raw, &ext); err != nil {
		e := &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: openai.CodeInvalidType, Message: err.Error()}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			e.Param = te.Field
			e.Message = fmt.Sprintf("%s must be of type %s", te.Field, te.Type)
		}
		return extras{}, e
	}
	return ext, nil
}

// writeParseError answers an *openai.Error with its status and body, and
// anything else with 400.
func writeParseError(w http.ResponseWriter, err error) {
	if oe, ok := openai.AsError(err); ok {
		writeRaw(w, oe.Status, oe.JSON())
		return
	}
	writeError(w, http.StatusBadRequest, openai.TypeInvalidRequest, err.Error())
}
