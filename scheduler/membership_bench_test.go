package scheduler

import (
	"fmt"
	"testing"
)

// BenchmarkSetInstances measures one membership change of a pool of n:
// the listed instances alternate between all n and all but the last
// eighth, as a flapping discovery source would send them (issue 24: a
// 4,096-instance apply cost over a second of CPU).
func BenchmarkSetInstances(b *testing.B) {
	for _, n := range []int{64, 512, 4096} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			all := make([]Instance, n)
			for i := range all {
				all[i] = Instance{ID: fmt.Sprintf("10.%d.%d.%d:8000", i>>16, (i>>8)&255, i&255)}
			}
			fewer := all[:n-n/8]
			s, err := New(DefaultConfig(), all)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				list := all
				if i%2 == 0 {
					list = fewer
				}
				if err := s.SetInstances(list); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
