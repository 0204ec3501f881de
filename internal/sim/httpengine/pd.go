package httpengine

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/dualmap/dualmap/internal/openai"
)

// Prefill/decode disaggregation, the way vLLM's KV connectors take it in a
// request's kv_transfer_params (what llm-d's P/D sidecar sends, and the
// stand-in of package pdsidecar):
//
//   - The prefill leg has do_remote_decode true (and max_tokens 1): the
//     engine prefills the prompt as any request, cannot stream it, and its
//     answer carries kv_transfer_params for the decode instance:
//     do_remote_prefill true, remote_engine_id its Name, remote_host and
//     remote_port from its Name when that is host:port, and
//     remote_block_ids the prompt's block hashes (hex), which stand for the
//     KV blocks it holds.
//   - The decode leg has do_remote_prefill true and those parameters: the
//     engine "transfers" the blocks, the leading ones of remote_block_ids
//     that match its own hashes of the prompt (a mismatch or nothing named
//     is recomputed, as a failed KV load is), charging KVTransferPerToken
//     simulated seconds per token transferred before the request enters the
//     engine, and puts them in its prefix cache (engine.Receive), so the
//     request prefills only what was not transferred. The answer's
//     cached_tokens count the transferred tokens as cached.

// kvParams are the kv_transfer_params fields the engine reads. Block IDs
// are kept raw: vLLM's are numbers, ours strings; only ours can match.
type kvParams struct {
	DoRemoteDecode  bool              `json:"do_remote_decode"`
	DoRemotePrefill bool              `json:"do_remote_prefill"`
	RemoteBlockIDs  []json.RawMessage `json:"remote_block_ids"`
}

// kvAnswer is the kv_transfer_params of a prefill leg's answer.
type kvAnswer struct {
	DoRemoteDecode  bool     `json:"do_remote_decode"`
	DoRemotePrefill bool     `json:"do_remote_prefill"`
	RemoteEngineID  string   `json:"remote_engine_id"`
	RemoteBlockIDs  []string `json:"remote_block_ids"`
	RemoteHost      string   `json:"remote_host,omitempty"`
	RemotePort      int      `json:"remote_port,omitempty"`
	TPSize          int      `json:"tp_size"`
}

// checkPD rejects what no KV connector takes: a prefill leg that streams,
// or one request asking for both legs.
func checkPD(kv *kvParams, stream bool) error {
	switch {
	case kv == nil:
		return nil
	case kv.DoRemoteDecode && kv.DoRemotePrefill:
		return &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Param: "kv_transfer_params",
			Message: "kv_transfer_params: do_remote_decode and do_remote_prefill cannot both be true"}
	case kv.DoRemoteDecode && stream:
		return &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Param: "stream",
			Message: "kv_transfer_params.do_remote_decode: the prefill leg cannot stream"}
	}
	return nil
}

// prefillAnswer is the kv_transfer_params a prefill leg of a prompt with
// these block hashes answers.
func (s *Server) prefillAnswer(blocks []uint64) *kvAnswer {
	a := &kvAnswer{DoRemotePrefill: true, RemoteEngineID: s.opt.Name, RemoteBlockIDs: make([]string, len(blocks)), TPSize: 1}
	for i, h := range blocks {
		a.RemoteBlockIDs[i] = blockID(h)
	}
	if host, port, err := net.SplitHostPort(s.opt.Name); err == nil {
		if p, err := strconv.Atoi(port); err == nil {
			a.RemoteHost, a.RemotePort = host, p
		}
	}
	return a
}

// blockID is a block hash as the prefill leg names it.
func blockID(h uint64) string { return strconv.FormatUint(h, 16) }

// received returns the leading blocks of the prompt's hashes that kv names
// in the same place: the KV a decode leg finds transferred.
func received(kv *kvParams, blocks []uint64) []uint64 {
	if kv == nil || !kv.DoRemotePrefill {
		return nil
	}
	n := 0
	for n < len(blocks) && n < len(kv.RemoteBlockIDs) {
		var id string
		if json.Unmarshal(kv.RemoteBlockIDs[n], &id) != nil || id != blockID(blocks[n]) {
			break
		}
		n++
	}
	return blocks[:n]
}

// transferWait is the wall time the transfer of tokens takes.
func (s *Server) transferWait(tokens int) time.Duration {
	return time.Duration(float64(tokens) * s.opt.KVTransferPerToken / s.opt.TimeScale * float64(time.Second))
}
