package extproc

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dualmap/dualmap/internal/config"
)

// Route settings: what Envoy says about the route of one ext_proc stream,
// where users configure everything else. Two channels carry them, both set
// by Envoy's configuration and never by a client:
//
//   - the stream's gRPC initial metadata: the ext_proc filter's
//     grpc_initial_metadata, merged by Envoy with a route's
//     ExtProcPerRoute.overrides.grpc_initial_metadata. Keys are
//     settingsMetaPrefix + the setting's name with '-' for '_'
//     (x-dualmap-pool, x-dualmap-client-slo, ...);
//   - the dynamic metadata namespace settingsNamespace ("dualmap")
//     forwarded with each message (metadata_options.forwarding_namespaces),
//     e.g. set per route by the set_metadata filter. Keys are the names;
//     values strings, numbers or booleans. They override the gRPC
//     metadata.
//
// A key this version does not know is logged once per route and counted
// (dualmap_route_settings_unknown_total), never fatal. A value it cannot
// use is a misconfiguration: the request gets 503 and the log says which
// key and why.

const (
	settingsNamespace  = "dualmap"
	settingsMetaPrefix = "x-dualmap-"
	// maxSettings bounds the keys read from each channel, maxSettingValue
	// the length of one value; past them the request gets 503.
	maxSettings     = 32
	maxSettingValue = 256
	// maxPriority bounds a priority, from Envoy or a client.
	maxPriority = 1_000_000
	// maxUnknownLogged bounds the (route, key) pairs remembered for
	// logging once.
	maxUnknownLogged = 1024
)

// errRouteSetting is a route setting from Envoy that the router cannot
// use: 503, a misconfiguration rather than the client's fault.
var errRouteSetting = errors.New("route setting from envoy")

// errBadPriority is a client priority header the route accepts but that is
// no integer in range: 400.
var errBadPriority = errors.New("bad priority")

// clientPolicy says what a route lets clients ask for with a header.
type clientPolicy uint8

const (
	clientUnset   clientPolicy = iota // the route did not say
	clientNone                        // the header is ignored
	clientTighter                     // SLO: only shorter than the route's; priority: only lower
	clientAny                         // the client's value wins
)

var clientPolicies = map[string]clientPolicy{
	"none": clientNone, "false": clientNone,
	"tighter": clientTighter, "lower": clientTighter,
	"any": clientAny, "true": clientAny,
}

// routeSettings are one stream's settings from Envoy. The zero value is a
// route that says nothing: the configuration's defaults, clients' SLO
// headers honoured as before, their priority headers ignored.
type routeSettings struct {
	route          string        // a name for logs and the debug headers ("" unnamed)
	pool           string        // the pool to route to ("": by model name)
	slo            time.Duration // the route's TTFT objective (0: slo.default)
	priority       int           // the route's priority (higher first; 0 if it sets none)
	prioritySet    bool          // the route set priority
	sessionHeader  string        // the session-affinity header ("": routing.session_header)
	clientSLO      clientPolicy
	clientPriority clientPolicy
}

// setting is one key and value as read from a channel.
type setting struct {
	key, value string
	source     string // "grpc_metadata" or "metadata", for logs and the metric
}

// collectSettings reads the settings of both channels, gRPC metadata
// first, so that the forwarded metadata overrides it. It fails on more
// than maxSettings keys in a channel or a value over maxSettingValue.
func collectSettings(md metadata.MD, meta *corev3.Metadata, out []setting) ([]setting, error) {
	n := 0
	keys := make([]string, 0, 8)
	for k := range md {
		if strings.HasPrefix(k, settingsMetaPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys) // deterministic errors and logs
	for _, k := range keys {
		if n++; n > maxSettings {
			return out, fmt.Errorf("%w: more than %d %s* gRPC metadata keys", errRouteSetting, maxSettings, settingsMetaPrefix)
		}
		vs := md[k]
		name := strings.ReplaceAll(strings.TrimPrefix(k, settingsMetaPrefix), "-", "_")
		if len(vs) != 1 {
			return out, fmt.Errorf("%w: gRPC metadata %s has %d values, want one", errRouteSetting, k, len(vs))
		}
		if len(vs[0]) > maxSettingValue {
			return out, fmt.Errorf("%w: gRPC metadata %s is longer than %d bytes", errRouteSetting, k, maxSettingValue)
		}
		out = append(out, setting{key: name, value: vs[0], source: "grpc_metadata"})
	}
	fields := meta.GetFilterMetadata()[settingsNamespace].GetFields()
	if len(fields) > maxSettings {
		return out, fmt.Errorf("%w: more than %d keys in metadata namespace %s", errRouteSetting, maxSettings, settingsNamespace)
	}
	keys = keys[:0]
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := scalar(fields[k])
		if err != nil {
			return out, fmt.Errorf("%w: metadata %s.%s: %v", errRouteSetting, settingsNamespace, boundKey(k), err)
		}
		out = append(out, setting{key: k, value: v, source: "metadata"})
	}
	return out, nil
}

// scalar is the text of a string, number or boolean value.
func scalar(v *structpb.Value) (string, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		if len(k.StringValue) > maxSettingValue {
			return "", fmt.Errorf("longer than %d bytes", maxSettingValue)
		}
		return k.StringValue, nil
	case *structpb.Value_NumberValue:
		f := k.NumberValue
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return "", fmt.Errorf("not a finite number")
		}
		if f == math.Trunc(f) && math.Abs(f) < 1e15 {
			return strconv.FormatInt(int64(f), 10), nil
		}
		return strconv.FormatFloat(f, 'g', -1, 64), nil
	case *structpb.Value_BoolValue:
		return strconv.FormatBool(k.BoolValue), nil
	}
	return "", fmt.Errorf("want a string, number or boolean")
}

// boundKey shortens a key for an error message or a log line.
func boundKey(k string) string {
	if len(k) > 64 {
		return strconv.Quote(k[:64]) + "..."
	}
	return strconv.Quote(k)
}

// parseSettings applies settings in order (a later key overrides an
// earlier one, which is then not read at all: a bad gRPC metadata value
// that the forwarded metadata overrides is no error). pools tells whether
// a pool name exists; slo resolves an SLO class or duration. It returns the
// settings, the keys it does not know, and the first value it cannot use.
func parseSettings(in []setting, pools func(string) bool, slo func(string) (time.Duration, error)) (routeSettings, []setting, error) {
	var rs routeSettings
	var unknown []setting
	for i, s := range in {
		if overridden(in[i+1:], s.key) {
			continue
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s %s = %q: %s", errRouteSetting, s.source, s.key, s.value, fmt.Sprintf(format, args...))
		}
		switch s.key {
		case "route":
			rs.route = s.value
		case "pool":
			if !pools(s.value) {
				return rs, unknown, bad("no such pool")
			}
			rs.pool = s.value
		case "slo":
			d, err := slo(s.value)
			if err != nil || d <= 0 {
				return rs, unknown, bad("want an slo.classes name or a positive duration")
			}
			rs.slo = d
		case "priority":
			p, err := strconv.Atoi(s.value)
			if err != nil || p < -maxPriority || p > maxPriority {
				return rs, unknown, bad("want an integer in [%d, %d]", -maxPriority, maxPriority)
			}
			rs.priority, rs.prioritySet = p, true
		case "session_header":
			if !config.ValidHeaderName(s.value) {
				return rs, unknown, bad("want a lowercase header name")
			}
			rs.sessionHeader = s.value
		case "client_slo", "client_priority":
			p, ok := clientPolicies[s.value]
			if !ok {
				return rs, unknown, bad("want none, tighter (lower), or any")
			}
			if s.key == "client_slo" {
				rs.clientSLO = p
			} else {
				rs.clientPriority = p
			}
		default:
			unknown = append(unknown, s)
		}
	}
	return rs, unknown, nil
}

// overridden reports whether a setting of later names key.
func overridden(later []setting, key string) bool {
	for _, s := range later {
		if s.key == key {
			return true
		}
	}
	return false
}

// sloFor is the request's objective: the route's (or slo.default), and the
// client's header value v where the route allows it. A route that sets an
// SLO lets clients only tighten it unless it says otherwise; one that does
// not lets them ask for any (as without Envoy settings). ignored reports a
// header the route did not let through.
func (rs *routeSettings) sloFor(c *config.Config, v string) (d time.Duration, ignored bool, err error) {
	base := rs.slo
	if base == 0 {
		base = c.SLO.Default
	}
	if v == "" {
		return base, false, nil
	}
	policy := rs.clientSLO
	if policy == clientUnset {
		policy = clientAny
		if rs.slo != 0 {
			policy = clientTighter
		}
	}
	if policy == clientNone {
		return base, true, nil
	}
	asked, err := c.SLOFor(v)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %s: %v", errBadSLO, c.Routing.SLOHeader, err)
	}
	if policy == clientTighter && asked > base {
		return base, true, nil
	}
	return asked, false, nil
}

// priorityFor is the request's priority: the route's (0 if it sets none),
// and the client's header value v only where the route allows it
// (client_priority; default none). ignored reports a header the route did
// not let through.
func (rs *routeSettings) priorityFor(c *config.Config, v string) (p int, ignored bool, err error) {
	base := rs.priority
	if v == "" {
		return base, false, nil
	}
	if rs.clientPriority == clientUnset || rs.clientPriority == clientNone {
		return base, true, nil
	}
	asked, err := strconv.Atoi(v)
	if err != nil || asked < -maxPriority || asked > maxPriority {
		return 0, false, fmt.Errorf("%w: %s: want an integer in [%d, %d]", errBadPriority, c.Routing.PriorityHeader, -maxPriority, maxPriority)
	}
	if rs.clientPriority == clientTighter && asked > base {
		return base, true, nil
	}
	return asked, false, nil
}

// objectivePriority is the request's priority when it names an inference
// objective of priority p (objectives in the configuration, so the value is
// the operator's, only its choice the client's): p unless the route says
// otherwise. A route that sets client_priority none keeps its own; lower
// lets the objective only lower it; a route that sets a priority without
// saying what clients may do keeps its own too.
func (rs *routeSettings) objectivePriority(p int) (prio int, ignored bool) {
	switch rs.clientPriority {
	case clientNone:
		return rs.priority, true
	case clientTighter:
		if p > rs.priority {
			return rs.priority, true
		}
	case clientUnset:
		if rs.prioritySet {
			return rs.priority, true
		}
	}
	return p, false
}

// routeLog remembers which unknown keys of which routes were logged, so
// each is logged once (up to maxUnknownLogged pairs; past that they are
// only counted).
type routeLog struct {
	mu   sync.Mutex // guards seen
	seen map[string]struct{}
}

// first reports whether (route, key) is new, and remembers it.
func (l *routeLog) first(route, key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]struct{}{}
	}
	k := route + "\x00" + key
	if _, ok := l.seen[k]; ok || len(l.seen) >= maxUnknownLogged {
		return false
	}
	l.seen[k] = struct{}{}
	return true
}

// routeMetrics count what route settings did.
type routeMetrics struct {
	unknown *prometheus.CounterVec // source
	ignored *prometheus.CounterVec // header: client headers the route did not let through
}

func newRouteMetrics(reg prometheus.Registerer) *routeMetrics {
	m := &routeMetrics{
		unknown: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_route_settings_unknown_total",
			Help: "Route setting keys from Envoy this version does not know (ignored), by channel.",
		}, []string{"source"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_client_settings_ignored_total",
			Help: "Client SLO or priority headers the route did not let through (ignored or clamped), by setting.",
		}, []string{"setting"}),
	}
	if reg != nil {
		reg.MustRegister(m.unknown, m.ignored)
	}
	return m
}

// readRouteSettings reads the stream's settings from its gRPC metadata and
// the request headers message's forwarded metadata into st.rs.
func (st *stream) readRouteSettings(meta *corev3.Metadata) error {
	md, _ := metadata.FromIncomingContext(st.ctx)
	var buf [8]setting
	s := st.s
	in, err := collectSettings(md, meta, buf[:0])
	if err != nil {
		s.misconfigured(err)
		return err
	}
	if len(in) == 0 {
		return nil
	}
	rs, unknown, err := parseSettings(in, func(name string) bool { return s.poolNamed(name) != nil }, s.cfg.SLOFor)
	if err != nil {
		s.misconfigured(err)
		return err
	}
	for _, u := range unknown {
		s.rm.unknown.WithLabelValues(u.source).Inc()
		if s.routeLog.first(rs.route, u.source+"/"+u.key) {
			s.log.Warn("unknown route setting from envoy; ignored", "route", rs.route, "source", u.source, "key", boundKey(u.key))
		}
	}
	st.rs = rs
	return nil
}

// misconfigured logs a route setting the router cannot use, once per
// distinct error (every request it fails is counted in dualmap_errors_total,
// kind route_setting).
func (s *Server) misconfigured(err error) {
	if s.routeLog.first("\x00error", err.Error()) {
		s.log.Error("route setting from envoy cannot be used; its requests get 503", "error", err)
	}
}

// poolNamed returns the pool called name, or nil.
func (s *Server) poolNamed(name string) *pool {
	for _, p := range s.pools {
		if p.name == name {
			return p
		}
	}
	return nil
}

// routePool is the pool the route names, or nil.
func (st *stream) routePool() *pool {
	if st.rs.pool == "" {
		return nil
	}
	return st.s.poolNamed(st.rs.pool)
}

// sessionHeader is the stream's session-affinity header ("" off).
func (st *stream) sessionHeader() string {
	if st.rs.sessionHeader != "" {
		return st.rs.sessionHeader
	}
	return st.s.cfg.Routing.SessionHeader
}

// requestControls resolves the request's SLO and priority from the route
// and the client's headers, counting the headers the route did not let
// through. The client's SLO is x-dualmap-slo, else x-llm-d-slo-ttft-ms
// (whole milliseconds); its priority the routing.priority_header value,
// else the priority configured for the inference objective it names
// (x-llm-d-inference-objective). Both are held to what the route allows.
func (st *stream) requestControls() (time.Duration, error) {
	cfg := &st.s.cfg
	asked := st.sloHeader
	if asked == "" && st.ttftHeader != "" {
		d, err := config.TTFTMillis(st.ttftHeader)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", errBadSLO, err)
		}
		asked = d.String()
	}
	slo, ignored, err := st.rs.sloFor(cfg, asked)
	if err != nil {
		return 0, err
	}
	if ignored {
		st.s.rm.ignored.WithLabelValues("slo").Inc()
	}
	prio, ignored, err := st.rs.priorityFor(cfg, st.priorityHeader)
	if err != nil {
		return 0, err
	}
	if st.priorityHeader == "" && st.objective != "" {
		prio, ignored = st.rs.objectivePriority(cfg.PriorityOf(st.objective))
	}
	if ignored {
		st.s.rm.ignored.WithLabelValues("priority").Inc()
	}
	st.slo, st.priority = slo, prio
	return slo, nil
}

// routeDebugHeaders are the debug response headers of the route's
// settings as applied to this request.
func (st *stream) routeDebugHeaders() []*corev3.HeaderValueOption {
	h := []*corev3.HeaderValueOption{
		header("x-dualmap-slo-ms", strconv.FormatInt(st.slo.Milliseconds(), 10)),
		header("x-dualmap-priority", strconv.Itoa(st.priority)),
	}
	if st.pool != nil {
		h = append(h, header("x-dualmap-pool", st.pool.name))
	}
	if st.rs.route != "" {
		h = append(h, header("x-dualmap-route", st.rs.route))
	}
	return h
}
