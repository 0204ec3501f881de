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

func TestChoicePricesABusyCandidate(t *testing.T) {
	// A cold prompt of 4,096 tokens and its pair: a runs 14 of 16 with no
	// prefill pending, b runs 2 with 2,500 tokens pending (0.25 s at the
	// estimator's 1e-4 s a token). A token costs 1e-4 s on an idle engine
	// and twice that with every slot taken (llm-d's simulator): on a the
	// prompt's prefill takes 0.79 s, on b 0.46 s behind the work pending
	// there, which an engine that prefills side by side barely feels. The
	// estimate without the busy fit sees only the pending work and picks a.
	for _, tc := range []struct {
		name          string
		parallel      bool
		teach         bool
		wantBusyFirst bool // the less busy b wins
	}{
		{"busy fit on a parallel engine", true, true, true},
		{"no busy fit yet", true, false, false},
		{"step-bound engine", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, q, a, b := busyPair(t, tc.parallel)
			if tc.teach {
				teachBusy(t, s, 16, 1)
			}
			want := a
			if tc.wantBusyFirst {
				want = b
			}
			if d := route(t, s, req(q)); d.Instance != want {
				t.Fatalf("Submit() = %s (%v), want %s (a %s, b %s)", d.Instance, d.Reason, want, a, b)
			}
		})
	}
}

// busyPair is TestChoicePricesABusyCandidate's set-up: a cold prompt q and
// its pair, a running 14 of 16 with nothing pending, b running 2 with 2,500
// tokens pending, on an engine whose admission fit reads work ahead as
// nearly free (parallel) or as costly as a request's own tokens.
func busyPair(t *testing.T, parallel bool) (s *Scheduler, q []uint64, a, b string) {
	t.Helper()
	cfg := pairConfig(nil)
	cfg.Cost.MaxSeqs = 16
	s, _ = mustNew(t, cfg, 8)
	q = prompt(31, 3, 0, 8)
	a, b = pairOf(t, s, q)
	setRunning(t, s, a, 14)
	setRunning(t, s, b, 2)
	loadInstance(t, s, b, 2500)
	if parallel {
		fitParallel(t, s, 1e-6)
	} else {
		fitParallel(t, s, 1e-4)
	}
	return s, q, a, b
}

func TestBusyExtraIsNeverNegative(t *testing.T) {
	// An idle engine's cost of a token is below the estimate's learned
	// average: the term adds nothing rather than a discount.
	cfg := pairConfig(nil)
	cfg.Cost.MaxSeqs = 16
	s, _ := mustNew(t, cfg, 2)
	fitParallel(t, s, 1e-6)
	teachBusy(t, s, 16, 1)
	in := s.byID[pool(2)[0].ID]
	if got := in.busyExtra(4096); got < 0 || got > 1e-9 {
		t.Errorf("busyExtra on an idle engine = %g, want 0", got)
	}
	setRunning(t, s, in.ID, 15)
	if got := in.busyExtra(4096); got < 0.37 || got > 0.45 {
		t.Errorf("busyExtra at 15 of 16 running = %g, want about 0.41 (4,096 tokens at 2e-4 against 1e-4)", got)
	}
	setRunning(t, s, in.ID, 16) // full: priced at the admission fit's average cost
	if got := in.busyExtra(4096); got != in.reprice(4096) {
		t.Errorf("busyExtra on a full engine = %g, want reprice's %g", got, in.reprice(4096))
	}
}

func TestWarmChoiceIgnoresTheBusyFit(t *testing.T) {
	// The same pair, with 6 of the prompt's 8 blocks cached on both: the
	// prompt is not cold (cached beyond the tie), so the estimate alone
	// decides, as it did before the busy fit was read. The work pending on
	// b is chosen so that the estimate picks a and the busy fit would pick b.
	cfg := pairConfig(nil)
	cfg.Cost.MaxSeqs = 16
	q := prompt(32, 4, 6, 8)
	for pending := 0; pending <= 4000; pending += 50 {
		s, _ := mustNew(t, cfg, 8)
		a, b := pairOf(t, s, q)
		for _, id := range []string{a, b} {
			if err := s.AddCached(id, q[:6]); err != nil {
				t.Fatal(err)
			}
		}
		setRunning(t, s, a, 14)
		setRunning(t, s, b, 2)
		loadInstance(t, s, b, pending)
		fitParallel(t, s, 1e-6)
		teachBusy(t, s, 16, 1)
		ia, ib := s.byID[a], s.byID[b]
		u := 2 * 512
		ea, eb := ia.ttft(u), ib.ttft(u)
		if !(ea < eb && ea+ia.busyExtra(u) > eb+ib.busyExtra(u)) {
			continue
		}
		if d := route(t, s, req(q)); d.Instance != a {
			t.Fatalf("pending %d on b: Submit() = %s (%v), want %s, the estimate's choice for a warm prompt", pending, d.Instance, d.Reason, a)
		}
		return
	}
	t.Fatal("no pending work on b separates the estimate's choice from the busy fit's")
}
