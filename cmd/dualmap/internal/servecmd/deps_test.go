package servecmd

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestServeLinksNoPlotting lists what the router links (go list -deps on
// this package) and fails on the simulator and its plotting stack: gonum
// is for `dualmap sim --plots` (package sim/plots) only.
func TestServeLinksNoPlotting(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list the dependencies with: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/dualmap/dualmap/internal/extproc") {
		t.Fatalf("go list -deps = %d packages without extproc; the check below would prove nothing", len(deps))
	}
	forbidden := []string{
		"gonum.org", // the plotting stack
		"github.com/dualmap/dualmap/internal/sim", // the simulator, sim/plots included
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("serve depends on %s; it must not link %s or anything under it", d, f)
			}
		}
	}
}
