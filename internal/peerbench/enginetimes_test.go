package peerbench

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// llm-d's simulator's page: the queue histogram counts only the requests
// that waited (42 of 71), the prefill histogram every one.
const timesPage = `# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{model_name="dualmap-sim",le="0.3"} 30
vllm:request_queue_time_seconds_bucket{model_name="dualmap-sim",le="+Inf"} 42
vllm:request_queue_time_seconds_sum{model_name="dualmap-sim"} 11.3
vllm:request_queue_time_seconds_count{model_name="dualmap-sim"} 42
vllm:request_prefill_time_seconds_bucket{model_name="dualmap-sim",le="+Inf"} 71
vllm:request_prefill_time_seconds_sum{model_name="dualmap-sim"} 24.5
vllm:request_prefill_time_seconds_count{model_name="dualmap-sim"} 71
vllm:request_prefill_time_seconds_created{model_name="dualmap-sim"} 1.7e9
`

func TestEngineTimes(t *testing.T) {
	et, ok, err := ParseEngineTimes([]byte(timesPage))
	if err != nil || !ok || et != (EngineTimes{QueueSeconds: 11.3, PrefillSeconds: 24.5, Prefilled: 71}) {
		t.Fatalf("ParseEngineTimes = %+v, %v, %v; want 11.3 s of queue and 24.5 s of prefill over 71 requests", et, ok, err)
	}
	run := et.Add(et).Sub(EngineTimes{QueueSeconds: 0.3, PrefillSeconds: 1, Prefilled: 2})
	ms := run.PerRequest()
	if ms == nil || math.Abs(ms.QueueMS-1000*22.3/140) > 1e-9 || math.Abs(ms.PrefillMS-1000*48.0/140) > 1e-9 {
		t.Fatalf("PerRequest = %+v, want 22.3 s and 48 s over 140 requests, in ms", ms)
	}
	if (EngineTimes{}).PerRequest() != nil {
		t.Fatal("PerRequest without requests: want nil")
	}
	// No queue histogram (no request waited yet): queue 0.
	noQueue := strings.Join(strings.Split(timesPage, "\n")[5:], "\n")
	if et, ok, err := ParseEngineTimes([]byte(noQueue)); err != nil || !ok || et.QueueSeconds != 0 || et.Prefilled != 71 {
		t.Fatalf("without the queue histogram: %+v, %v, %v", et, ok, err)
	}
	// dualmap engine's page serves neither: not ok, no error.
	if _, ok, err := ParseEngineTimes([]byte(vllmPage)); ok || err != nil {
		t.Fatalf("a page without them: ok %v, err %v; want not ok and no error", ok, err)
	}
	for name, page := range map[string]string{
		"bad value":    "vllm:request_prefill_time_seconds_count x\n",
		"negative":     "vllm:request_prefill_time_seconds_count 3\nvllm:request_prefill_time_seconds_sum -1\n",
		"infinite":     "vllm:request_prefill_time_seconds_count 3\nvllm:request_prefill_time_seconds_sum 1\nvllm:request_queue_time_seconds_sum +Inf\n",
		"bad labels":   "vllm:request_prefill_time_seconds_count{a=\"b\" 3\n",
		"NaN prefills": "vllm:request_prefill_time_seconds_count NaN\nvllm:request_prefill_time_seconds_sum 1\n",
	} {
		if _, _, err := ParseEngineTimes([]byte(page)); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}

	var md bytes.Buffer
	if err := Markdown(&md, []Row{{Engine: "e", EngineTimes: ms}, {Engine: "f"}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| engine queue / prefill ms |", "| 0.0% | 159 / 343 |", "| 0.0% | - |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, md.String())
		}
	}
}

func FuzzParseEngineTimes(f *testing.F) {
	f.Add(timesPage)
	f.Add(vllmPage)
	f.Add("vllm:request_prefill_time_seconds_count 1e308\nvllm:request_prefill_time_seconds_sum 1e308\nvllm:request_prefill_time_seconds_sum 1e308\n")
	f.Fuzz(func(t *testing.T, page string) {
		et, ok, err := ParseEngineTimes([]byte(page))
		if err != nil || !ok {
			return
		}
		for _, v := range []float64{et.QueueSeconds, et.PrefillSeconds, et.Prefilled} {
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("ParseEngineTimes(%q) = %+v: want finite sums >= 0", page, et)
			}
		}
		if ms := et.PerRequest(); ms != nil && !(ms.QueueMS >= 0 && ms.PrefillMS >= 0) {
			t.Fatalf("PerRequest = %+v", ms)
		}
	})
}
