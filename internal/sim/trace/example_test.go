package trace_test

import (
	"fmt"
	"strings"

	"github.com/dualmap/dualmap/internal/sim/trace"
)

func ExampleRead() {
	input := `{"timestamp": 1000, "input_length": 1000, "output_length": 20, "hash_ids": [0, 1]}
{"timestamp": 1500, "input_length": 700, "output_length": 10, "hash_ids": [0, 2]}
`
	t, err := trace.Read(strings.NewReader(input), trace.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range t.Requests {
		fmt.Println(r.Arrival, r.InputTokens, r.Blocks)
	}
	fmt.Printf("hit rate upper bound %.2f\n", t.Stats().UpperBoundHitRate)
	// Output:
	// 0s 1000 [0 1]
	// 500ms 700 [0 2]
	// hit rate upper bound 0.25
}

func ExampleGenerate() {
	t, err := trace.Generate(trace.GenConfig{Seed: 7, Requests: 1000, Arrival: trace.ArrivalBursty})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := t.ScaleToQPS(10); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(t.Source)
	fmt.Printf("%.1f qps\n", t.Stats().MeanQPS)
	// Output:
	// generated: synthetic tool&agent workload (seed=7 requests=1000 qps=4 arrival=bursty)
	// 10.0 qps
}
