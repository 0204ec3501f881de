package scheduler

import (
	"math"
	"testing"
)

// teachBusy teaches s's busyFit an engine on which a token of a request's
// own prompt costs 1e-4 s alone and 1e-4 x (1 + grow) with all of its
// slots running, 30 ms per request besides (llm-d's simulator's
// time-factor-under-load).
func teachBusy(t *testing.T, s *Scheduler, slots int, grow float64) {
	t.Helper()
	for i := range 300 {
		own := float64(100 + 53*(i%41))
		running := float64(1 + i%slots)
		ahead := float64(2000 * (i % 5))
		s.est.busy.observe(ahead, own, running, 0.03+1e-6*ahead+1e-4*own*(1+grow*(running-1)/float64(slots-1)))
	}
}

func TestBusyFitLearnsTheCostOfAFullEngine(t *testing.T) {
	s, clk := mustNew(t, Config{Policy: "round-robin"}, 2)
	if _, ok := s.est.busy.own(16); ok {
		t.Fatal("own(16) identified before any first token")
	}
	teachBusy(t, s, 16, 1) // llm-d's simulator: twice the time with every slot taken
	for _, running := range []float64{1, 8, 16} {
		got, ok := s.est.busy.own(running)
		if want := 1e-4 * (1 + (running-1)/15); !ok || math.Abs(got-want) > 0.02*want {
			t.Errorf("own(%g) = %g, %v; want %g", running, got, ok, want)
		}
	}
	id := pool(2)[0].ID
	if st := state(s, id); st.OwnCostFull != 0 {
		t.Errorf("OwnCostFull = %g with no limit learned, want 0", st.OwnCostFull)
	}
	for range 2 { // a queue at 16 running that lasts: the limit
		if _, err := s.SetEngineLimit(id, EngineLoad{Waiting: 2, Running: 16}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(slotConfirm)
	}
	if st := state(s, id); st.SlotLimit != 16 || math.Abs(st.OwnCostFull-2e-4) > 4e-6 {
		t.Errorf("OwnCostFull = %g at a limit of %d, want about 2e-4 at 16", st.OwnCostFull, st.SlotLimit)
	}
}

func TestBusyFitNeedsASpreadOfLoads(t *testing.T) {
	// Every request started with the same number running: own and own x
	// running are one regressor, and the fit says nothing. Nor does it
	// count what it cannot read.
	s, _ := mustNew(t, Config{Policy: "round-robin"}, 2)
	for i := range 300 {
		own := float64(100 + 53*(i%41))
		s.est.busy.observe(float64(1000*(i%3)), own, 8, 0.03+1.5e-4*own)
		s.est.busy.observe(0, own, 0, 1)
		s.est.busy.observe(0, own, math.NaN(), 1)
		s.est.busy.observe(0, own, math.Inf(1), 1)
		s.est.busy.observe(0, own, 8, math.Inf(1))
		s.est.busy.observe(-1, own, 8, 1)
	}
	if c, ok := s.est.busy.own(16); ok {
		t.Fatalf("own(16) = %g from one count of requests running, want not identified", c)
	}
}

func TestStartRunning(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "round-robin", Cost: CostConfig{MaxSeqs: 256}}, 1)
	for _, tc := range []struct {
		l    load
		want float64
	}{
		{load{occupied: 0, slots: 16}, 1},
		{load{occupied: 15, slots: 16}, 16},
		{load{occupied: 16, slots: 16}, -1},
		{load{occupied: 20, slots: 16}, -1},
		{load{occupied: 20}, 21}, // no limit known: MaxSeqs
		{load{occupied: 256}, -1},
	} {
		if got := s.est.startRunning(tc.l); got != tc.want {
			t.Errorf("startRunning(%+v) = %g, want %g", tc.l, got, tc.want)
		}
	}
}

func TestFreeSlotPricesAColdPrefillAtTheLoadItStartsIn(t *testing.T) {
	// The holder runs 4 of its 4: a slot frees in 1 s, and it holds 3,072
	// of the request's 4,096 tokens. A token costs 1e-4 s on an idle
	// engine and four times that with every slot taken. Every other
	// instance runs 3 of 4: the request would fill the last slot and
	// prefill all 4,096 tokens at 4e-4 s, 1.6 s, where the holder costs
	// the wait and 1,024 tokens, 1.1-1.4 s: it stays, where the single
	// cost learned over every load (0.41 s of prefill) sent it away. With
	// the others idle (one running once it starts) the cold prefill costs
	// 0.41-0.72 s, and it goes.
	for _, tc := range []struct {
		others int
		teach  bool
		free   bool
	}{{3, false, true}, {3, true, false}, {0, true, true}} {
		s, q, b := withFullHolder(t, nil, 4, 4, 0)
		for _, in := range s.Instances() {
			if in.ID != b {
				setRunning(t, s, in.ID, tc.others)
			}
		}
		if tc.teach {
			teachBusy(t, s, 4, 3)
		}
		if d := route(t, s, req(q)); (d.Reason == ReasonSlot) != tc.free {
			t.Errorf("others running %d, fit taught %v: Submit() = %s (%v), free slot taken %v, want %v", tc.others, tc.teach, d.Instance, d.Reason, d.Reason == ReasonSlot, tc.free)
		}
	}
}
