package scheduler

import (
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
