package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/dualmap/dualmap/cmd/dualmap/internal/cli"
	"github.com/dualmap/dualmap/internal/replay"
	"github.com/dualmap/dualmap/internal/sim/trace"
)

const replayUsage = `usage: dualmap replay --trace FILE --url URL [flags]

Replays a Mooncake-format trace against an OpenAI-compatible endpoint (an
Envoy in front of the DualMap router, or a single model server), at the
trace's own timestamps or rescaled to --qps, and reports client-side TTFT and
end-to-end latency, failures by status, the prefix-cache hit rate the server
reports in usage, and per-instance figures from the x-dualmap-instance or
x-engine-name response header. Prompts are synthesised text in which equal
trace block ids give equal text (4 bytes per token), so the server sees the
trace's prefix structure. Ctrl-C stops the replay and reports what was sent.

With --write-trace FILE it sends nothing: it writes the requests it would
send (after --requests, --qps, --scale-tokens and --max-output) to FILE as a
Mooncake trace of --write-block-size-token blocks (512, the Mooncake traces'),
for another benchmark client to replay (scripts/aiperf-run.sh); --url is then
not needed. Reuse finer than one new block is lost: with --scale-tokens 0.25
the replayed prompts' blocks are 128 tokens long, and --write-block-size 128
keeps all of it.

Examples:
  dualmap replay --trace ../shared/traces/conversation_trace.jsonl --url http://127.0.0.1:8080 \
      --requests 500 --qps 5 --scale-tokens 0.1 --json replay.json
  dualmap replay --trace ../shared/traces/conversation_trace.jsonl --requests 600 \
      --scale-tokens 0.25 --max-output 64 --write-trace conversation-600.jsonl
`

func runReplay(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, replayUsage, "\nflags:\n"); fs.PrintDefaults() }
	headers := replayHeaders{}
	fs.Var(headers, "header", "extra request header `key=value` (repeatable), e.g. x-slo-class=gold")
	var (
		tracePath   = fs.String("trace", "", "trace file (Mooncake JSONL)")
		blockSize   = fs.Int("block-size", trace.DefaultBlockSize, "tokens per hash block of the trace")
		url         = fs.String("url", "", "base URL of the endpoint, e.g. http://127.0.0.1:8080 (/v1/... is appended)")
		endpoint    = fs.String("endpoint", replay.EndpointChat, "API: chat (/v1/chat/completions, one user message) | completions (/v1/completions)")
		model       = fs.String("model", replay.DefaultModel, "model field of the requests")
		qps         = fs.Float64("qps", 0, "target request rate: rescale the trace's arrivals (0: the trace's own timestamps)")
		requests    = fs.Int("requests", 0, "replay only the first N requests (0: all)")
		concurrency = fs.Int("concurrency", replay.DefaultConcurrency, "max requests in flight; later arrivals wait (counted as delayed)")
		stream      = fs.Bool("stream", true, "stream responses (TTFT at the first content chunk); false: TTFT = E2E")
		maxOutput   = fs.Int("max-output", replay.DefaultMaxOutput, "cap on max_tokens, otherwise the trace's output length (-1: no cap)")
		scaleTokens = fs.Float64("scale-tokens", 1, "multiply every request's input and output tokens (and the block size) by this, e.g. 0.1 for a fast demo")
		seed        = fs.Uint64("seed", 1, "prompt text seed: another seed gives prompts sharing nothing with this one's")
		timeout     = fs.Duration("timeout", replay.DefaultTimeout, "per-request timeout")
		ignoreEOS   = fs.Bool("ignore-eos", false, `send "ignore_eos": true (vLLM, SGLang) so that servers generate max_tokens tokens`)
		jsonPath    = fs.String("json", "", `write {"summary":..., "results":[...]} to this file`)
		writeTrace  = fs.String("write-trace", "", "send nothing: write the requests that would be sent to this file as a Mooncake trace")
		writeBlock  = fs.Int("write-block-size", trace.DefaultBlockSize, "--write-trace: tokens per block of the trace written")
		quiet       = fs.Bool("quiet", false, "no progress bar")
	)
	if help, err := cli.ParseFlags(fs, args); help || err != nil {
		return err
	}
	switch {
	case *tracePath == "":
		return fmt.Errorf("%w: --trace FILE is required", cli.ErrUsage)
	case *url == "" && *writeTrace == "":
		return fmt.Errorf("%w: --url URL (or --write-trace FILE) is required", cli.ErrUsage)
	case *url != "" && *writeTrace != "":
		return fmt.Errorf("%w: --write-trace sends nothing; drop --url", cli.ErrUsage)
	case *requests < 0:
		return fmt.Errorf("%w: --requests must be >= 0", cli.ErrUsage)
	case *blockSize < 1:
		return fmt.Errorf("%w: --block-size must be >= 1", cli.ErrUsage)
	case *concurrency < 1:
		return fmt.Errorf("%w: --concurrency must be >= 1", cli.ErrUsage)
	case *maxOutput == 0 || *maxOutput < -1:
		return fmt.Errorf("%w: --max-output must be >= 1, or -1 for no cap", cli.ErrUsage)
	}
	tr, err := trace.ReadFile(*tracePath, trace.Options{BlockSize: *blockSize, Limit: *requests})
	if err != nil {
		return fmt.Errorf("reading the trace: %w", err)
	}
	opt := replay.Options{
		URL: *url, Endpoint: *endpoint, Model: *model, QPS: *qps, Requests: *requests,
		Concurrency: *concurrency, Stream: *stream, MaxOutput: *maxOutput, ScaleTokens: *scaleTokens,
		Seed: *seed, Timeout: *timeout, Headers: headers, IgnoreEOS: *ignoreEOS,
	}
	if *writeTrace != "" {
		return writeWorkload(*writeTrace, *writeBlock, tr, opt, stderr, *quiet)
	}
	if !*quiet {
		opt.Progress = stderr
		fmt.Fprintf(stderr, "replaying %d requests of %s against %s\n", len(tr.Requests), *tracePath, *url)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	results, sum, runErr := replay.Run(ctx, tr, opt)
	if errors.Is(runErr, replay.ErrInvalidOptions) {
		return fmt.Errorf("%w: %v", cli.ErrUsage, runErr)
	}
	if !*quiet {
		fmt.Fprintf(stderr, "%d requests in %s\n", len(results), time.Since(start).Round(time.Millisecond))
	}
	if err := sum.WriteTable(stdout); err != nil {
		return err
	}
	if *jsonPath != "" {
		if results == nil {
			results = []replay.Result{}
		}
		out := struct {
			Summary replay.Summary  `json:"summary"`
			Results []replay.Result `json:"results"`
		}{sum, results}
		if err := writeJSON(*jsonPath, out); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	switch {
	case runErr != nil:
		return runErr
	case sum.Requests == 0:
		return errors.New("no request was sent")
	case sum.OK == 0:
		return fmt.Errorf("all %d requests failed", sum.Requests)
	}
	return nil
}

// writeWorkload writes what a replay of tr with opt would send to path as
// a Mooncake trace (replay.Workload).
func writeWorkload(path string, blockSize int, tr *trace.Trace, opt replay.Options, stderr io.Writer, quiet bool) error {
	if blockSize < 1 {
		return fmt.Errorf("%w: --write-block-size must be >= 1", cli.ErrUsage)
	}
	w, err := replay.Workload(tr, opt, blockSize)
	if errors.Is(err, replay.ErrInvalidOptions) {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if err != nil {
		return err
	}
	if err := writeTraceFile(path, w); err != nil {
		return fmt.Errorf("--write-trace: %w", err)
	}
	if !quiet {
		fmt.Fprintf(stderr, "wrote %d requests to %s: %v\n", len(w.Requests), path, w.Stats())
	}
	return nil
}

// replayHeaders is the repeatable --header flag: key=value (or key: value).
type replayHeaders map[string]string

func (h replayHeaders) String() string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + h[k]
	}
	return strings.Join(parts, ",")
}

func (h replayHeaders) Set(s string) error {
	i := strings.IndexAny(s, "=:")
	if i <= 0 {
		return fmt.Errorf("%q is not key=value", s)
	}
	k := strings.TrimSpace(s[:i])
	if k == "" || strings.ContainsAny(k, " \t") {
		return fmt.Errorf("%q is not key=value", s)
	}
	h[k] = strings.TrimSpace(s[i+1:])
	return nil
}
