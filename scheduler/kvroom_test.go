package scheduler

import (
	"testing"
	"time"
)

// A prompt that the engine's reported KV memory cannot take waits in the
// router queue until it can: a completion frees the room, and a report
// too old to trust, or a prompt larger than the whole memory, holds
// nothing.
func TestKVRoomHoldsAPromptThatDoesNotFit(t *testing.T) {
	for _, report := range []string{"load", "limit"} {
		t.Run(report, func(t *testing.T) {
			q := QueueConfig{Adaptive: true, MaxWait: time.Minute, IdleRunning: 8}
			s, clk := mustNew(t, Config{Policy: "cache-affinity", SLO: time.Second, Queue: q}, 1)
			id := pool(1)[0].ID
			set := func(l EngineLoad) {
				t.Helper()
				var err error
				if report == "load" {
					err = s.SetEngineLoad(id, l)
				} else {
					_, err = s.SetEngineLimit(id, l)
				}
				if err != nil {
					t.Fatalf("engine report %+v: %v", l, err)
				}
			}
			o := recorder(s)
			set(EngineLoad{KVUsage: 0.5, KVCapacity: 10000}) // 5,000 tokens free

			first := req(prompt(1, 1, 0, 8)) // 4,096 tokens
			if d := route(t, s, first); d.Queued {
				t.Fatal("a 4,096-token prompt with 5,000 tokens free was held")
			}
			second := req(prompt(2, 2, 0, 8))
			if d := route(t, s, second); !d.Queued {
				t.Fatal("a 4,096-token prompt with 904 tokens free was dispatched")
			}
			if got := state(s, id).Engine.KVCapacity; got != 10000 {
				t.Errorf("InstanceState.Engine.KVCapacity = %d, want 10000", got)
			}
			o.take()
			s.Complete(first)
			if sent := o.take(); len(sent) != 1 || sent[0].Request != second {
				t.Fatalf("after the first completed: dispatched %d requests, want the held one", len(sent))
			}

			set(EngineLoad{KVUsage: 0.95, KVCapacity: 10000})
			huge := req(prompt(4, 4, 0, 40)) // 20,480 tokens: never fits
			if d := route(t, s, huge); d.Queued {
				t.Error("a prompt larger than the whole KV memory was held (it would wait out MaxWait)")
			}
			third := req(prompt(3, 3, 0, 8))
			if d := route(t, s, third); !d.Queued {
				t.Fatal("a 4,096-token prompt with 500 tokens free was dispatched")
			}
			o.take()
			clk.Advance(kvRoomStale + time.Second)
			s.Tick()
			if sent := o.take(); len(sent) != 1 || sent[0].Request != third {
				t.Fatalf("with the report %v old: dispatched %d requests, want the held one", kvRoomStale+time.Second, len(sent))
			}

			set(EngineLoad{KVUsage: 0.95}) // no size: the rule does not act
			if d := route(t, s, req(prompt(5, 5, 0, 8))); d.Queued {
				t.Error("held on an engine that reports no KV size")
			}
		})
	}
}

func TestKVRoomRejectsANegativeSize(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "cache-affinity"}, 1)
	if err := s.SetEngineLoad(pool(1)[0].ID, EngineLoad{KVCapacity: -1}); err == nil {
		t.Error("SetEngineLoad accepted a KV size of -1")
	}
}
