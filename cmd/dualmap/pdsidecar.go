package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dualmap/dualmap/cmd/dualmap/internal/cli"
	"github.com/dualmap/dualmap/internal/sim/pdsidecar"
)

const pdSidecarUsage = `usage: dualmap pd-sidecar --listen ADDR --decode ADDR [flags]

Serves a stand-in for the decode-side routing sidecar of a prefill/decode
pool (llm-d's pd-sidecar speaks the same protocol), in front of one decode
engine: a request whose --header names a prefill instance is sent there
first (kv_transfer_params do_remote_decode, max_tokens 1, not streamed),
then to the decode engine with the kv_transfer_params the prefill answered;
any other request goes straight to the decode engine. For tests and demos
with "dualmap engine" as both halves: it sends prompts to any host the header
names, so only the router (which removes a client's own value) may reach it. Prints "pd-sidecar listening on ADDR"
to stderr once it listens; SIGINT or SIGTERM stop it after in-flight
requests finish (at most 10 s).

Example:
  dualmap engine --listen 127.0.0.1:8201 &
  dualmap pd-sidecar --listen 127.0.0.1:8001 --decode 127.0.0.1:8201
`

func runPDSidecar(args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("pd-sidecar", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, pdSidecarUsage, "\nflags:\n"); fs.PrintDefaults() }
	var (
		listen  = fs.String("listen", "", "address to serve on, e.g. 127.0.0.1:8001 (required)")
		decode  = fs.String("decode", "", "the local decode engine, host:port (required)")
		header  = fs.String("header", pdsidecar.DefaultHeader, "request header naming the prefill instance (the router's pools[].pd.header)")
		maxBody = fs.Int64("max-body-bytes", pdsidecar.DefaultMaxBodyBytes, "bound on a request body sent in two legs and on a prefill answer")
		timeout = fs.Duration("prefill-timeout", pdsidecar.DefaultPrefillTimeout, "bound on the prefill leg")
	)
	if help, err := cli.ParseFlags(fs, args); help || err != nil {
		return err
	}
	if *listen == "" || *decode == "" {
		return fmt.Errorf("%w: --listen ADDR and --decode ADDR are required", cli.ErrUsage)
	}
	if *maxBody < 1 || *timeout <= 0 {
		return fmt.Errorf("%w: --max-body-bytes and --prefill-timeout must be positive", cli.ErrUsage)
	}
	s, err := pdsidecar.New(pdsidecar.Options{Decode: *decode, Header: *header, MaxBodyBytes: *maxBody, PrefillTimeout: *timeout})
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("pd-sidecar: listen: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return pdsidecar.Serve(ctx, l, s, 10*time.Second, func(addr string) { fmt.Fprintf(stderr, "pd-sidecar listening on %s\n", addr) })
}
