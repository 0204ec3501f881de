package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dualmap/dualmap/cmd/dualmap/internal/cli"
	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/sim"
	"github.com/dualmap/dualmap/internal/sim/engine"
	"github.com/dualmap/dualmap/internal/sim/plots"
	"github.com/dualmap/dualmap/internal/sim/trace"
	"github.com/dualmap/dualmap/scheduler"
)

const simUsage = `usage: dualmap sim [flags]

Replays a trace through the scheduler in front of simulated model servers and
reports SLO attainment, TTFT, cache hit rate and load balance per policy,
queue mode and request rate. See docs/simulator.md.

Example:
  dualmap sim --trace ../shared/traces/conversation_trace.jsonl --requests 4000 --json out.json
`

func runSim(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, simUsage, "\nflags:\n"); fs.PrintDefaults() }
	var (
		tracePath  = fs.String("trace", "", "trace file (Mooncake JSONL or --format generic)")
		format     = fs.String("format", "mooncake", "trace format: mooncake | generic")
		blockSize  = fs.Int("block-size", trace.DefaultBlockSize, "tokens per hash block of the trace")
		timeUnit   = fs.String("time-unit", "ms", "generic format: timestamp unit s | ms | us | ns")
		chainIDs   = fs.Bool("chain-ids", false, "generic format: hash ids are per-block content ids; chain them")
		skipBad    = fs.Bool("skip-malformed", false, "skip malformed trace lines (counted) instead of failing")
		generate   = fs.String("generate", "", "generate a workload instead: key=value,... (shape=agent|fixed|hot-prefix|chat, arrival=poisson|bursty|onoff, slo_mix=2s:0.5/30s:0.5, ...: docs/simulator.md); \"default\" for the tool&agent-like defaults")
		writeTrace = fs.String("write-trace", "", "also write the (generated or read) trace to this file in Mooncake format")
		requests   = fs.Int("requests", 0, "use only the first N requests (0: all)")
		spread     = fs.Bool("spread-ties", false, "spread requests that share a timestamp at random over the interval to the next timestamp (coarse timestamps otherwise make bursts)")
		copies     = fs.Int("trace-copies", 1, "merge this many disjoint copies of the trace (scales load and prefix diversity for large pools)")
		qpsFlag    = fs.String("qps", "", "request rates to sweep, e.g. 1,2,3 (empty: auto-range from light load until every policy's attainment < 50%)")
		autoStart  = fs.Float64("qps-start", 1, "auto-range: first rate")
		autoStep   = fs.Float64("qps-step", 0.5, "auto-range: step")
		instances  = fs.Int("instances", 8, "model-server instances")
		profile    = fs.String("profile", "qwen2.5-7b-910b4", "engine profile: a built-in name or a JSON file ("+strings.Join(engine.Profiles(), ", ")+")")
		engModel   = fs.String("engine-model", "", "engine model: realistic (KV memory, preemption, context-dependent decode) | legacy (the first model); empty: the profile's engine_model, else realistic")
		noise      = fs.Float64("prefill-noise", -1, "relative std-dev of a per-request factor on the engine's prefill cost (realistic model; negative: the profile's prefill_noise)")
		policies   = fs.String("policies", strings.Join(append(scheduler.Policies(), sim.PaperPreset), ","), "policy variants: name or name(key=value,...); "+sim.PaperPreset+" is DualMap with the paper's literal settings (docs/simulator.md)")
		queues     = fs.String("queue", "router,paper", "queue modes: router | engine | paper (comma-separated)")
		slo        = fs.Duration("slo", scheduler.DefaultConfig().SLO, "TTFT SLO")
		budget     = fs.Int("budget", 0, "router-queue admission budget, pending prefill tokens per instance (0: the adaptive rule, the router's default; -1: no router queue)")
		replicas   = fs.Int("replicas", 1, "router replicas")
		syncEvery  = fs.Duration("sync-interval", 500*time.Millisecond, "replicas: how often they exchange load, cache and key-depth state (0: never)")
		seeds      = fs.Int("seeds", 1, "run every point with seeds 1..N and report mean and spread")
		warmup     = fs.Int("warmup", 500, "leading requests left out of the metrics")
		scaleFlag  = fs.String("scale", "", "elastic scaling: time:instances,... e.g. 74s:8,200s:4")
		horizon    = fs.Duration("horizon", 0, "how long after the last arrival a run may go on (0: max(120s, 20 x SLO))")
		jsonPath   = fs.String("json", "", "write the report as JSON to this file")
		plotsDir   = fs.String("plots", "", "write PNG charts to this directory")
		workers    = fs.Int("workers", 0, "parallel runs (0: one per core)")
		quiet      = fs.Bool("quiet", false, "no progress bar")
		costPrior  = fs.Float64("cost-prior", 0, "imperfect information: the router's prior per-token prefill cost is the profile's times this factor (0 or 1: exact); its online learning has to correct it")
		idxDelay   = fs.Duration("index-delay", 0, "imperfect information: a router records a dispatch in its cache index this long afterwards (0: at once)")
		idxDrop    = fs.Float64("index-drop", 0, "imperfect information: a router's cache-index record is lost with this probability")
		metricPoll = fs.Duration("metrics-poll", 0, "imperfect information: routers read the engines' own load every this long (0: at every change; negative: never)")
		pdFlag     = fs.String("pd", "", "size a prefill/decode pool instead of the sweep: pools N (mixed) or P:D (prefill:decode instances), e.g. 8,2:6,4:4,6:2; needs --qps; --policies default "+pdPolicies+" (DualMap's P/D pools run decode-capacity over the decode half, a baseline runs over both); no router queue")
		pdXfer     = fs.Float64("pd-transfer", 3e-6, "P/D: KV transfer time per prompt token, seconds")
		pdMin      = fs.Int("pd-min-uncached", config.DefaultMinUncachedTokens, "P/D: the decider's pd.min_uncached_tokens")
		pdRatio    = fs.Float64("pd-decode-hit-ratio", config.DefaultDecodeHitRatio, "P/D: the decider's pd.decode_hit_ratio")
	)
	// The scheduler settings: one flag per simulator key of the table the
	// router's file and the policy specs use (--max-running, --candidates...).
	var sched scheduler.Config
	settingFlags := map[string]bool{}
	for _, st := range config.SchedulerSettings() {
		if st.Key == "" {
			continue
		}
		settingFlags[st.Flag()] = true
		fs.Func(st.Flag(), "scheduler setting "+st.Key+": "+st.Help, func(v string) error { return st.Set(&sched, v) })
	}
	if help, err := cli.ParseFlags(fs, args); help || err != nil {
		return err
	}
	if err := validSchedulerFlags(fs, sched, settingFlags); err != nil {
		return err
	}
	tr, err := loadTrace(*tracePath, *generate, trace.Options{
		Format: trace.Format(*format), BlockSize: *blockSize, TimeUnit: *timeUnit,
		ChainIDs: *chainIDs, SkipMalformed: *skipBad, Limit: *requests,
	})
	if err != nil {
		return err
	}
	if tr.Skipped > 0 {
		fmt.Fprintf(stderr, "skipped %d malformed trace lines\n", tr.Skipped)
	}
	if *requests > 0 && len(tr.Requests) > *requests {
		tr.Head(*requests)
	}
	if *spread {
		tr.SpreadTies(1)
	}
	if *copies > 1 {
		tr = tr.Replicate(*copies, 0x7ace)
	}
	if *writeTrace != "" {
		if err := writeTraceFile(*writeTrace, tr); err != nil {
			return err
		}
	}
	prof, err := loadEngineProfile(*profile, *engModel, *noise)
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	specs, err := parseSpecs(*policies)
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	qps, err := parseFloats(*qpsFlag)
	if err != nil {
		return fmt.Errorf("%w: --qps: %v", cli.ErrUsage, err)
	}
	scale, err := parseScale(*scaleFlag)
	if err != nil {
		return fmt.Errorf("%w: --scale: %v", cli.ErrUsage, err)
	}
	if *seeds < 1 {
		return fmt.Errorf("%w: --seeds must be >= 1", cli.ErrUsage)
	}
	sw := &sim.Sweep{
		Trace:     tr,
		Specs:     specs,
		Queues:    splitList(*queues),
		QPS:       qps,
		AutoStart: *autoStart,
		AutoStep:  *autoStep,
		Workers:   *workers,
		Base: sim.Options{
			Instances: *instances, Profile: prof, SLO: *slo, Budget: *budget,
			Replicas: *replicas, SyncInterval: *syncEvery, Warmup: *warmup,
			Scale: scale, Horizon: *horizon, Timeline: len(scale) > 0,
			Info: sim.Info{CostPrior: *costPrior, IndexDelay: *idxDelay, IndexDrop: *idxDrop, MetricsPoll: *metricPoll},
		},
	}
	if *warmup == 0 {
		sw.Base.Warmup = -1
	}
	sw.Base.Scheduler = sched
	if *pdFlag != "" {
		pols := *policies
		if !isSet(fs, "policies") {
			pols = pdPolicies
		}
		return runPDSizing(stdout, tr, *pdFlag, qps, pols, sw.Base,
			sim.PDOptions{TransferPerToken: *pdXfer, MinUncachedTokens: *pdMin, DecodeHitRatio: *pdRatio})
	}
	for i := 1; i <= *seeds; i++ {
		sw.Seeds = append(sw.Seeds, uint64(i))
	}
	if !*quiet {
		bar := newProgress(stderr)
		sw.Progress = bar.update
		defer bar.finish()
	}
	start := time.Now()
	rep, err := sw.Run()
	if err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(stderr, "\r%d runs in %s%20s\n", len(rep.Runs), sim.Elapsed(time.Since(start)), "")
	}
	if err := sim.WriteTable(stdout, rep); err != nil {
		return err
	}
	if *jsonPath != "" {
		if err := writeJSON(*jsonPath, rep); err != nil {
			return err
		}
	}
	if *plotsDir != "" {
		if err := plots.Write(*plotsDir, rep); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\ncharts written to %s\n", *plotsDir)
	}
	return nil
}

// validSchedulerFlags checks the scheduler settings given as flags with
// the scheduler's own validation, naming the flags.
func validSchedulerFlags(fs *flag.FlagSet, sched scheduler.Config, settingFlags map[string]bool) error {
	if err := sched.Validate(); err != nil {
		var given []string
		fs.Visit(func(f *flag.Flag) {
			if settingFlags[f.Name] {
				given = append(given, "--"+f.Name)
			}
		})
		return fmt.Errorf("%w: %s: %v", cli.ErrUsage, strings.Join(given, ", "), err)
	}
	return nil
}

// loadEngineProfile loads a profile and applies the --engine-model and
// --prefill-noise overrides (empty, negative: keep the profile's).
func loadEngineProfile(name, model string, noise float64) (engine.Profile, error) {
	prof, err := engine.LoadProfile(name)
	if err != nil {
		return prof, err
	}
	if model != "" {
		prof.EngineModel = model
	}
	if noise >= 0 {
		prof.PrefillNoise = noise
	}
	if err := prof.Validate(); err != nil {
		return prof, fmt.Errorf("--engine-model/--prefill-noise: %w", err)
	}
	return prof.Resolved(), nil
}

func loadTrace(path, generate string, opt trace.Options) (*trace.Trace, error) {
	switch {
	case path != "" && generate != "":
		return nil, fmt.Errorf("%w: give --trace or --generate, not both", cli.ErrUsage)
	case generate != "":
		cfg, err := trace.ParseGenConfig(generate)
		if err != nil {
			return nil, fmt.Errorf("%w: --generate: %v", cli.ErrUsage, err)
		}
		return trace.Generate(cfg)
	case path == "":
		return nil, fmt.Errorf("%w: --trace FILE or --generate is required", cli.ErrUsage)
	}
	return trace.ReadFile(path, opt)
}

// parseSpecs splits a policy list on commas outside parentheses.
func parseSpecs(s string) ([]sim.Spec, error) {
	var specs []sim.Spec
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '(':
				depth++
				continue
			case ')':
				depth--
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		part := strings.TrimSpace(s[start:i])
		start = i + 1
		if part == "" {
			continue
		}
		sp, err := sim.ParseSpec(part)
		if err != nil {
			return nil, err
		}
		specs = append(specs, sp)
	}
	if len(specs) == 0 {
		return nil, errors.New("--policies: no policy given")
	}
	return specs, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, p := range splitList(s) {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", p)
		}
		out = append(out, f)
	}
	return out, nil
}

func parseScale(s string) ([]sim.ScaleStep, error) {
	var out []sim.ScaleStep
	for _, p := range splitList(s) {
		at, n, ok := strings.Cut(p, ":")
		d, err1 := time.ParseDuration(at)
		k, err2 := strconv.Atoi(n)
		if !ok || err1 != nil || err2 != nil || k < 1 || d < 0 {
			return nil, fmt.Errorf("%q is not time:instances (e.g. 74s:8)", p)
		}
		out = append(out, sim.ScaleStep{At: d, Instances: k})
	}
	return out, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func writeTraceFile(path string, tr *trace.Trace) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := trace.Write(f, tr); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// progress is a one-line progress bar on stderr, redrawn at most 5 times a second.
type progress struct {
	w    io.Writer
	last time.Time
}

func newProgress(w io.Writer) *progress { return &progress{w: w} }

func (p *progress) update(done, total int) {
	if time.Since(p.last) < 200*time.Millisecond && done < total {
		return
	}
	p.last = time.Now()
	const width = 30
	fill := width * done / max(total, 1)
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d runs", strings.Repeat("=", fill), strings.Repeat(" ", width-fill), done, total)
}

func (p *progress) finish() {}
