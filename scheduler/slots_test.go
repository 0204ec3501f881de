package scheduler

import (
	"errors"
	"testing"
	"time"
)

// An engine whose reports show a queue lasting slotConfirm, with as many
// running as the most seen in such a queue, has that learned limit as the
// estimate's MaxSeqs: with the prior of 256 a 16-sequence engine looks free
// of slot waits until 256 requests are in flight. A queue seen in one
// report (an arrival before the engine's next step), a queue below the
// limit (waiting for memory), a report of no queue, and the router seeing
// more completions since the report than the engine had waiting all leave
// the prior in place.
func TestSlotWaitLearnedLimit(t *testing.T) {
	cost := bare(CostConfig{PerToken: 0.0001, ServiceTime: 8, LearnRate: -1}) // MaxSeqs 256
	s, clk := mustNew(t, Config{Policy: "least-loaded", Cost: cost}, 1)
	id := pool(1)[0].ID
	probe := req(prompt(9, 9, 0, 2))
	estimate := func() time.Duration { t.Helper(); return estimated(t, s, probe) }
	report := func(l EngineLoad) {
		t.Helper()
		if err := s.SetEngineLoad(id, l); err != nil {
			t.Fatal(err)
		}
	}
	near := func(got, want time.Duration) bool { return got > want-time.Microsecond && got < want+time.Microsecond }
	idle := estimate()
	full := EngineLoad{Waiting: 4, Running: 16}
	// The queue's own 4 requests count as work ahead at the average
	// uncached prompt, which is 0 before any dispatch: only slots remain.
	report(full)
	clk.Advance(slotConfirm - time.Millisecond)
	report(full)
	if got := estimate() - idle; got != 0 {
		t.Errorf("a queue for less than %v: the estimate grew by %v, want no slot wait", slotConfirm, got)
	}
	clk.Advance(time.Millisecond)
	report(full)
	// 20 occupied on a 16-slot engine: 5 over, S/16 = 0.5 s each.
	if got, want := estimate()-idle, 2500*time.Millisecond; !near(got, want) {
		t.Errorf("a queue for %v at 16 running with 4 waiting: the estimate grew by %v, want the slot wait %v", slotConfirm, got, want)
	}
	if st := s.Instances()[0]; st.Slots != 16 || st.SlotLimit != 16 {
		t.Errorf("Instances(): slots %d, slot limit %d; want 16 and 16", st.Slots, st.SlotLimit)
	}
	for _, l := range []EngineLoad{
		{Waiting: 4, Running: 10}, // a queue below the limit: memory, not slots
		{Waiting: 0, Running: 16}, // at the limit, no queue
		{Waiting: 4, Running: 16}, // a queue again, not lasting yet
	} {
		report(l)
		if got := estimate() - idle; got != 0 {
			t.Errorf("after a report of %+v: the estimate grew by %v, want no slot wait (256 slots)", l, got)
		}
	}
	var rs []*Request
	for k := range 2 {
		r := req(prompt(uint64(k+1), uint64(k+1), 0, 2))
		route(t, s, r)
		s.FirstToken(r)
		rs = append(rs, r)
	}
	clk.Advance(slotConfirm)
	report(EngineLoad{Waiting: 1, Running: 16})
	// Ahead: the one waiting request at the average uncached prompt
	// (1,024 tokens x 0.1 ms).
	const ahead = 102400 * time.Microsecond
	if got, want := estimate()-idle, ahead+time.Second; !near(got, want) {
		t.Errorf("the learned limit again: the estimate grew by %v, want %v (17 occupied on 16 slots, and the queue ahead)", got, want)
	}
	for _, r := range rs {
		s.Complete(r) // more completions since the report than it had waiting
	}
	if got := estimate() - idle; !near(got, ahead) {
		t.Errorf("after the engine's queue drained as far as the router saw: the estimate grew by %v, want %v (no slot wait)", got, ahead)
	}
}

// Reports through SetEngineLimit teach the limit and nothing else: the
// engine's queue does not count as work ahead, and a queue below the most
// running seen (a long prefill, a full KV cache) teaches no limit. A
// lasting queue at the most running does, and from then on the router's
// own requests in flight are compared with it, whatever the later reports
// say, until one shows more running than the limit.
func TestSlotLimitFromReportsAlone(t *testing.T) {
	cost := bare(CostConfig{PerToken: 0.0001, ServiceTime: 8, LearnRate: -1}) // MaxSeqs 256
	s, clk := mustNew(t, Config{Policy: "least-loaded", Cost: cost}, 1)
	id := pool(1)[0].ID
	probe := req(prompt(9, 9, 0, 2))
	estimate := func() time.Duration { t.Helper(); return estimated(t, s, probe) }
	report := func(l EngineLoad) {
		t.Helper()
		if _, err := s.SetEngineLimit(id, l); err != nil {
			t.Fatal(err)
		}
	}
	lasting := func(l EngineLoad) {
		t.Helper()
		report(l)
		clk.Advance(slotConfirm)
		report(l)
	}
	near := func(got, want time.Duration) bool { return got > want-time.Microsecond && got < want+time.Microsecond }
	idle := estimate()
	var rs []*Request
	for k := range 19 {
		r := req(prompt(uint64(k+1), uint64(k+1), 0, 0)) // no blocks: no prefill work
		route(t, s, r)
		s.FirstToken(r)
		rs = append(rs, r)
	}
	busy := estimate() // 19 in flight, no slot wait on 256 slots
	if busy != idle {
		t.Fatalf("19 fully cached requests in flight changed the estimate by %v; the test wants none", busy-idle)
	}
	report(EngineLoad{Running: 18})
	lasting(EngineLoad{Waiting: 30, Running: 12}) // below the most seen
	if got := estimate() - busy; got != 0 {
		t.Errorf("a lasting queue at 12 running after 18 were seen: the estimate grew by %v, want nothing (no limit, the queue not counted)", got)
	}
	if st := s.Instances()[0]; st.SlotLimit != 0 || st.Slots != 256 {
		t.Errorf("Instances(): slot limit %d, slots %d; want 0 and 256", st.SlotLimit, st.Slots)
	}
	lasting(EngineLoad{Waiting: 2, Running: 18})
	// 19 in flight on 18 slots: 19 - 18 + 1 = 2 over, S/18 each.
	if got, want := estimate()-busy, 16*time.Second/18; !near(got, want) {
		t.Errorf("a lasting queue at the most running (18): the estimate grew by %v, want the slot wait %v", got, want)
	}
	report(EngineLoad{}) // the engine drained: the limit stays
	if got, want := estimate()-busy, 16*time.Second/18; !near(got, want) {
		t.Errorf("after a report of an idle engine: the estimate grew by %v, want the slot wait %v", got, want)
	}
	if st := s.Instances()[0]; st.SlotLimit != 18 || st.Slots != 18 {
		t.Errorf("Instances(): slot limit %d, slots %d; want 18 and 18", st.SlotLimit, st.Slots)
	}
	report(EngineLoad{Running: 19}) // more than the limit ran
	if got := estimate() - busy; got != 0 {
		t.Errorf("after a report of 19 running over a limit of 18: the estimate grew by %v, want no slot wait", got)
	}
	for _, l := range []EngineLoad{{Waiting: -1}, {KVUsage: 2}} {
		if _, err := s.SetEngineLimit(id, l); err == nil {
			t.Errorf("SetEngineLimit(%+v) = nil, want an error", l)
		}
	}
	if _, err := s.SetEngineLimit("nowhere:1", EngineLoad{}); !errors.Is(err, ErrUnknownInstance) {
		t.Errorf("SetEngineLimit of an unknown instance = %v, want ErrUnknownInstance", err)
	}
	for _, r := range rs {
		s.Complete(r)
	}
}

// S, the time a request holds a sequence slot, is learned from its decode
// and its own prefill: a request that waited in the engine's queue for 5 s
// before a prefill of one block and a decode of 2 s held a slot for 2 s
// and the block's prefill, not 7 s (a queue that grew would otherwise make
// slots look slower to free, and the estimated queue longer).
func TestServiceTimeIsTimeInSlot(t *testing.T) {
	cost := bare(CostConfig{PerToken: 0.0001, ServiceTime: 20, LearnRate: -1})
	s, clk := mustNew(t, Config{Policy: "least-loaded", Cost: cost}, 1)
	for k := range 400 {
		r := req(prompt(uint64(k+1), uint64(k+1), 0, 1))
		route(t, s, r)
		own := time.Duration(float64(r.uncached) * 0.0001 * float64(time.Second))
		clk.Advance(5*time.Second + own)
		s.FirstToken(r)
		clk.Advance(2 * time.Second)
		s.Complete(r)
	}
	if got := s.Instances()[0].ServiceTime; got < 2 || got > 2.1 {
		t.Errorf("learned service time %v s, want the 2 s of decode and one block's prefill, not the 7 s from dispatch", got)
	}
}

// A limit learned on one instance holds for the others of the pool until
// they learn their own or show more running than it.
func TestSlotLimitSharedByThePool(t *testing.T) {
	cost := bare(CostConfig{PerToken: 0.0001, ServiceTime: 8, LearnRate: -1})
	s, clk := mustNew(t, Config{Policy: "least-loaded", Cost: cost}, 3)
	ids := pool(3)
	report := func(id string, l EngineLoad) {
		t.Helper()
		if _, err := s.SetEngineLimit(id, l); err != nil {
			t.Fatal(err)
		}
	}
	slots := func() (out []int) {
		for _, st := range s.Instances() {
			out = append(out, st.Slots)
		}
		return out
	}
	report(ids[1].ID, EngineLoad{Running: 10})
	report(ids[2].ID, EngineLoad{Running: 24})
	if got := slots(); got[0] != 256 || got[1] != 256 || got[2] != 256 {
		t.Fatalf("before any limit: slots %v, want 256 each", got)
	}
	report(ids[0].ID, EngineLoad{Waiting: 3, Running: 16})
	clk.Advance(slotConfirm)
	report(ids[0].ID, EngineLoad{Waiting: 3, Running: 16})
	if got := slots(); got[0] != 16 || got[1] != 16 || got[2] != 256 {
		t.Errorf("16 learned on the first instance: slots %v, want 16, 16 (seen 10 running) and 256 (seen 24)", got)
	}
	report(ids[1].ID, EngineLoad{Running: 17})
	if got := slots(); got[1] != 256 {
		t.Errorf("the second instance ran 17 over the pool's 16: slots %d, want 256", got[1])
	}
}

// The pool's first learned limit puts the learned cost back to its prior
// where the uncounted slot waits had raised it; a cost below the prior
// stays.
func TestFirstLimitUnlearnsWaits(t *testing.T) {
	for _, tt := range []struct {
		name       string
		ttft, want float64 // the TTFT observed 200 times; the cost wanted after the limit
	}{{"raised", 2, 0.0001}, {"lowered", 0.001, -1}} {
		cost := bare(CostConfig{PerToken: 0.0001, ServiceTime: 8})
		s, clk := mustNew(t, Config{Policy: "least-loaded", Cost: cost}, 1)
		id := pool(1)[0].ID
		for k := range 200 {
			r := req(prompt(uint64(k+1), uint64(k+1), 0, 4))
			route(t, s, r)
			clk.Advance(time.Duration(tt.ttft * float64(time.Second)))
			s.FirstToken(r)
			s.Complete(r)
		}
		before := s.Instances()[0].CostPerToken
		if (tt.want > 0) != (before > 0.0001) {
			t.Fatalf("%s: learned cost %g against the prior 0.0001; the test wants it %s", tt.name, before, tt.name)
		}
		for range 2 {
			if _, err := s.SetEngineLimit(id, EngineLoad{Waiting: 2, Running: 8}); err != nil {
				t.Fatal(err)
			}
			clk.Advance(slotConfirm)
		}
		want := tt.want
		if want < 0 {
			want = before
		}
		if got := s.Instances()[0].CostPerToken; got != want {
			t.Errorf("%s: cost %g after the first limit, want %g (was %g)", tt.name, got, want, before)
		}
	}
}
