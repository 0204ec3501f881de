package pool

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/dualmap/dualmap/internal/config"
)

func TestMain(m *testing.M) {
	// zmq4's PUB writer goroutine can miss its socket's Close (a lost
	// condition-variable signal): the test publishers' (kvevents_test.go),
	// never the router's subscriber.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"))
}

func parseConfig(t testing.TB, y string) config.Config {
	t.Helper()
	c, err := config.Parse([]byte(y), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const fourInstances = `
pools:
  - instances:
      - address: 10.0.0.1:8000
      - address: 10.0.0.2:8000
      - address: 10.0.0.3:8000
      - address: 10.0.0.4:8000
`

// testManager is a Manager with its registry; run starts its background
// work until the test ends.
type testManager struct {
	*Manager
	reg *prometheus.Registry
}

func startManager(t testing.TB, cfg config.Config, run bool, opt Options) *testManager {
	t.Helper()
	reg := prometheus.NewRegistry()
	opt.Registry, opt.TickInterval = reg, 10*time.Millisecond
	m, err := New(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if run {
		go func() { m.Run(ctx); close(done) }()
	} else {
		close(done)
	}
	t.Cleanup(func() {
		cancel()
		<-done
		m.Close()
	})
	return &testManager{Manager: m, reg: reg}
}

// metricValues flattens m's counters and gauges: name{labels} -> value.
func (m *testManager) metricValues(t testing.TB) map[string]float64 {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, x := range mf.GetMetric() {
			var labels []string
			for _, l := range x.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case x.GetCounter() != nil:
				out[key] = x.GetCounter().GetValue()
			case x.GetGauge() != nil:
				out[key] = x.GetGauge().GetValue()
			}
		}
	}
	return out
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// healthyInstance is a loopback HTTP server answering the health check.
func healthyInstance(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}
