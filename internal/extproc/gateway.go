package extproc

import (
	"errors"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// What Gateway API Inference Extension gateways and their users send an
// endpoint picker besides the request (GIE's endpoint picker protocol, and
// the request headers llm-d's picker reads).

// Dynamic metadata of the endpoint picker protocol.
const (
	// subsetNamespace/subsetKey: the endpoints the gateway allows for this
	// request (request filter metadata): a list of ip:port, or one string
	// of them separated by commas.
	subsetNamespace = "envoy.lb.subset_hint"
	subsetKey       = "x-gateway-destination-endpoint-subset"
	// servedNamespace/servedKey: the endpoint that served the request, as
	// the proxy reports it on the response path.
	servedNamespace = "envoy.lb"
	servedKey       = "x-gateway-destination-endpoint-served"
)

// Request headers the gateways' users send.
const (
	objectiveHeader       = "x-llm-d-inference-objective"
	legacyObjectiveHeader = "x-gateway-inference-objective"
	ttftHeader            = "x-llm-d-slo-ttft-ms"
	// droppedHeader tells a client why its request was shed (429, 503).
	droppedHeader = "x-llm-d-request-dropped-reason"
)

// Bounds of the subset hint: entries, and bytes of one.
const (
	maxSubset      = 4096
	maxSubsetEntry = 64
)

// errSubset is a subset hint that allows no endpoint (503) or cannot be
// read (the gateway's mistake, also 503: the client can do nothing about it).
var errSubset = errors.New("extproc: subset hint")

// subsetHint reads the gateway's subset hint from the request's metadata:
// nil when there is none; an error when it is present but empty, of
// another type, or over the bounds.
func subsetHint(md *corev3.Metadata) ([]string, error) {
	ns, ok := md.GetFilterMetadata()[subsetNamespace]
	if !ok {
		return nil, nil
	}
	v, ok := ns.GetFields()[subsetKey]
	if !ok {
		return nil, nil
	}
	var out []string
	add := func(s string) error {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			return nil
		case len(s) > maxSubsetEntry:
			return fmt.Errorf("%w: %s/%s: an entry of %d bytes (at most %d)", errSubset, subsetNamespace, subsetKey, len(s), maxSubsetEntry)
		case len(out) == maxSubset:
			return fmt.Errorf("%w: %s/%s: more than %d entries", errSubset, subsetNamespace, subsetKey, maxSubset)
		}
		out = append(out, s)
		return nil
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		for _, s := range strings.Split(k.StringValue, ",") {
			if err := add(s); err != nil {
				return nil, err
			}
		}
	case *structpb.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			s, ok := e.GetKind().(*structpb.Value_StringValue)
			if !ok {
				return nil, fmt.Errorf("%w: %s/%s: a list entry that is not a string", errSubset, subsetNamespace, subsetKey)
			}
			for _, p := range strings.Split(s.StringValue, ",") {
				if err := add(p); err != nil {
					return nil, err
				}
			}
		}
	default:
		return nil, fmt.Errorf("%w: %s/%s is neither a list nor a string", errSubset, subsetNamespace, subsetKey)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s/%s is empty: no endpoint allowed", errSubset, subsetNamespace, subsetKey)
	}
	return out, nil
}

// servedMetadata returns the endpoint the proxy reports as the one that
// served, or "".
func servedMetadata(md *corev3.Metadata) (string, bool) {
	f, ok := md.GetFilterMetadata()[servedNamespace].GetFields()[servedKey]
	if !ok {
		return "", false
	}
	v := f.GetStringValue()
	if len(v) > maxSubsetEntry {
		return "", true // reported, but no address: nothing to believe
	}
	return strings.TrimSpace(v), true
}
