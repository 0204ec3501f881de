package engine

import (
	"fmt"
	"testing"
)

// The changes ObserveCache reports, replayed into two sets (HBM, the
// whole cache), are the cache as it is, in both models and with or
// without a DRAM tier; no change is out of order (a block cached twice
// without leaving HBM, evicted while not in HBM, dropped while in HBM).
func TestObserveCache(t *testing.T) {
	for _, model := range []string{ModelLegacy, ModelRealistic} {
		for _, dram := range []int64{0, 32 * 512} {
			t.Run(fmt.Sprintf("%s/dram=%d", model, dram), func(t *testing.T) {
				p := testProfile()
				p.EngineModel, p.DRAMCacheBytes = model, dram
				p.HBMCacheBytes = 16 * 512
				if model == ModelRealistic {
					p.LegacyValues.HBMCacheBytes = 0
				}
				e := newEngine(t, p)
				hbm, all := map[uint64]bool{}, map[uint64]bool{}
				seen := map[uint64]bool{}
				n := 0
				e.ObserveCache(func(h uint64, c CacheChange) {
					n++
					seen[h] = true
					switch c {
					case BlockCached:
						if hbm[h] {
							t.Fatalf("block %x cached while in HBM", h)
						}
						hbm[h], all[h] = true, true
					case BlockEvicted:
						if !hbm[h] {
							t.Fatalf("block %x evicted while not in HBM", h)
						}
						delete(hbm, h)
					case BlockDropped:
						if hbm[h] || !all[h] {
							t.Fatalf("block %x dropped while in HBM or not cached", h)
						}
						delete(all, h)
					}
				})
				var arr []arrival
				for i := range 40 {
					arr = append(arr, arrival{at: float64(i) / 4, r: &Request{ID: int64(i), Blocks: chain(uint64(i%7+1), 3, 6), Tokens: 6 * 512, Output: 3}})
				}
				drive(t, e, arr)
				if n == 0 {
					t.Fatal("no cache change observed")
				}
				for h := range seen {
					if all[h] != e.Holds(h) {
						t.Errorf("block %x: observed in cache %v, Holds() = %v", h, all[h], e.Holds(h))
					}
				}
				if len(hbm) > 16 {
					t.Errorf("%d blocks in HBM as observed, capacity 16", len(hbm))
				}
			})
		}
	}
}
