package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dualmap/dualmap/cmd/dualmap/internal/cli"
	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/kvevents"
	"github.com/dualmap/dualmap/internal/sim/engine"
	"github.com/dualmap/dualmap/internal/sim/httpengine"
	"github.com/dualmap/dualmap/internal/telemetry"
)

const engineUsage = `usage: dualmap engine --listen ADDR [flags]

Serves a simulated OpenAI-compatible model server (chat and text
completions, streaming, /v1/models, /health, vLLM /metrics) whose timing and
prefix cache come from an engine profile, for demos and end-to-end tests of
the router without accelerators. Prints "engine listening on ADDR" to stderr
once it listens; SIGINT or SIGTERM stop it after in-flight requests finish
(at most 10 s). Faults can be changed at run time with POST /admin/fault
{"error_rate":x,"added_latency_ms":n,"down":bool,"refuse_inference":bool}
(refuse_inference: new connections are refused and inference connections reset, while
connections already open still answer /health). It also serves both legs of a
prefill/decode request (kv_transfer_params, as vLLM's KV connectors take
them): a prefill leg (do_remote_decode) answers the KV it holds, and a decode
leg (do_remote_prefill) receives that KV into its prefix cache, after
--kv-transfer-per-token per token, instead of computing it.

With --kv-events it publishes its prefix cache as vLLM does (BlockStored
with the token ids, BlockRemoved, in its own block hashes), sequence numbers
from 0 at every start, and serves replay with --kv-events-replay.

Example:
  dualmap engine --listen 127.0.0.1:8001 --time-scale 10
  dualmap engine --listen 127.0.0.1:8001 --kv-events 'tcp://*:5557' --kv-events-replay 'tcp://*:5558'
`

// engineGrace bounds how long in-flight requests may finish on shutdown.
const engineGrace = 10 * time.Second

func runEngine(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, engineUsage, "\nflags:\n"); fs.PrintDefaults() }
	var (
		listen    = fs.String("listen", "", "address to serve on, e.g. 127.0.0.1:8001 (required)")
		profile   = fs.String("profile", httpengine.DefaultProfile, "engine profile: a built-in name or a JSON file ("+strings.Join(engine.Profiles(), ", ")+")")
		engModel  = fs.String("engine-model", "", "engine model: realistic | legacy (empty: the profile's engine_model, else realistic)")
		noise     = fs.Float64("prefill-noise", -1, "relative std-dev of a per-request factor on the prefill cost (realistic model; negative: the profile's)")
		blockSize = fs.Int("block-size", httpengine.DefaultBlockSize, "tokens per prompt hash block and cache block; must match the router pool's block_size")
		model     = fs.String("model", httpengine.DefaultModel, "model name listed by /v1/models and in the metrics")
		timeScale = fs.Float64("time-scale", 10, "simulated seconds per wall second (10: ten times faster than the profile)")
		output    = fs.Int("output-tokens", httpengine.DefaultOutputTokens, "tokens generated per request, unless max_tokens is lower")
		errorRate = fs.Float64("error-rate", 0, "fraction of inference requests answered 500")
		latency   = fs.Duration("added-latency", 0, "wall delay before every response")
		refuse    = fs.Bool("refuse-connections", false, "reset every connection (a crashed server)")
		seed      = fs.Uint64("seed", 1, "seed of the failed-request draws")
		transfer  = fs.Float64("kv-transfer-per-token", httpengine.DefaultKVTransferPerToken, "simulated seconds per prompt token whose KV a decode leg (kv_transfer_params.do_remote_prefill) receives from a prefill instance; 0: free")
		name      = fs.String("name", "", "instance name in the x-engine-name header and metrics (default: the listen address)")
		kvEvents  = fs.String("kv-events", "", "publish KV-cache events in vLLM's format (ZMQ PUB) on this endpoint, e.g. tcp://*:5557 (binds; a host names a router to dial, as vLLM)")
		kvReplay  = fs.String("kv-events-replay", "", "serve replay (ZMQ ROUTER) on this endpoint, e.g. tcp://*:5558 (vLLM's replay_endpoint)")
		kvEnc     = fs.String("kv-events-encoding", "maps", "event encoding: maps (newer vLLM) | arrays (older vLLM)")
		kvTopic   = fs.String("kv-events-topic", "", "topic frame (default kv@<listen address>@<model>, llm-d's convention)")
		kvMode    = fs.String("kv-events-mode", "", "bind | connect (default as vLLM: bind when the endpoint's host is *, :: or 0.0.0.0, else connect)")
	)
	if help, err := cli.ParseFlags(fs, args); help || err != nil {
		return err
	}
	if *listen == "" {
		return fmt.Errorf("%w: --listen ADDR is required", cli.ErrUsage)
	}
	prof, err := loadEngineProfile(*profile, *engModel, *noise)
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	cfg := engineConfig{
		listen: *listen,
		refuse: *refuse,
		grace:  engineGrace,
		opt: httpengine.Options{
			Profile: prof, BlockSize: *blockSize, Model: *model, TimeScale: *timeScale,
			OutputTokens: *output, ErrorRate: *errorRate, AddedLatency: *latency, Seed: *seed, Name: *name,
			KVTransferPerToken: kvTransfer(*transfer),
		},
	}
	if *kvEvents != "" {
		enc, ok := map[string]kvevents.Encoding{"maps": kvevents.Maps, "arrays": kvevents.Arrays}[*kvEnc]
		if !ok {
			return fmt.Errorf("%w: --kv-events-encoding must be maps or arrays, got %q", cli.ErrUsage, *kvEnc)
		}
		if *kvMode != "" && *kvMode != kvevents.Bind && *kvMode != kvevents.Connect {
			return fmt.Errorf("%w: --kv-events-mode must be bind or connect, got %q", cli.ErrUsage, *kvMode)
		}
		cfg.kv = &kvevents.PublisherConfig{Endpoint: *kvEvents, Mode: *kvMode, Replay: *kvReplay, Topic: *kvTopic, Encoding: enc, ReplayTopic: enc == kvevents.Maps}
	} else if *kvReplay != "" {
		return fmt.Errorf("%w: --kv-events-replay needs --kv-events", cli.ErrUsage)
	}
	// Flag values New would reject are usage errors; check before listening.
	if _, err := httpengine.New(cfg.opt); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveEngine(ctx, cfg, func(addr string) { fmt.Fprintf(stderr, "engine listening on %s\n", addr) })
}

// kvTransfer maps the flag's 0 (free) to Options' "none" (negative).
func kvTransfer(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}

// engineConfig is what serveEngine needs.
type engineConfig struct {
	listen string
	opt    httpengine.Options // an empty Name becomes the bound address
	refuse bool               // start refusing connections
	grace  time.Duration      // how long in-flight requests may finish
	// kv, when set, publishes KV-cache events (an empty Topic becomes
	// kv@<bound address>@<model>).
	kv *kvevents.PublisherConfig
}

// serveEngine serves a simulated engine until ctx ends, then stops
// accepting, lets in-flight requests finish for up to cfg.grace, and
// returns nil. ready, if not nil, gets the bound address once it listens.
func serveEngine(ctx context.Context, cfg engineConfig, ready func(addr string)) error {
	l, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("engine: listen: %w", err)
	}
	addr := l.Addr().String()
	if cfg.opt.Name == "" {
		cfg.opt.Name = addr
	}
	tel, err := telemetry.Setup(ctx, "dualmap-engine", config.Tracing{}, os.Getenv)
	if err != nil {
		l.Close()
		return fmt.Errorf("engine: %w", err)
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tel.Shutdown(c)
	}()
	cfg.opt.Tracer = tel.Tracer()
	if cfg.kv != nil {
		pc := *cfg.kv
		if pc.Topic == "" {
			pc.Topic = "kv@" + addr + "@" + cfg.opt.Model
		}
		pub, err := kvevents.NewPublisher(pc)
		if err != nil {
			l.Close()
			return fmt.Errorf("engine: %w", err)
		}
		defer pub.Close()
		cfg.opt.KVEvents = pub
	}
	srv, err := httpengine.New(cfg.opt)
	if err != nil {
		l.Close()
		return fmt.Errorf("engine: %w", err)
	}
	srv.SetRefuse(cfg.refuse)
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}

	// The engine runs until the HTTP server has shut down, so that
	// in-flight requests can finish.
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	ran := make(chan struct{})
	go func() { srv.Run(runCtx); close(ran) }()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(srv.Listener(l)) }()
	if ready != nil {
		ready(addr)
	}

	select {
	case err := <-errc:
		stopRun()
		<-ran
		return fmt.Errorf("engine: serve: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), cfg.grace)
	defer cancel()
	if err := hs.Shutdown(shutCtx); err != nil {
		hs.Close() // grace over: cut the remaining requests
	}
	<-errc // http.ErrServerClosed
	stopRun()
	<-ran
	return nil
}
