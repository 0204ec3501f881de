//go:build race

package sim

// raceEnabled: the race detector slows simulations about tenfold, so the
// heaviest tests run a smaller version of themselves.
const raceEnabled = true
