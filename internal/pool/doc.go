// Package pool manages the pools of model-server instances a router routes
// for. A pool owns its prompter (tokenizer and block hashing), its
// scheduler, its shared-state store and the replicas' coordinator over it,
// its membership (the static list, DNS, xDS, reloads), the health of its
// instances (one owner: passive backoff, active checks and the management
// server's verdicts are decided in one place, under one lock, and told to
// the scheduler there), its engine signal sources (Source: the Prometheus
// poller and the health probe today) and its gauges.
//
// A request meets its pool once: Route tokenizes the prompt, waits in the
// router queue if need be (the scheduler's EnqueueAndWait) and returns a
// Ticket for the dispatched request; the ticket takes the response's
// status (health attribution, the proxy's fallback), the first token and
// the end, and releases the request's load when told Done, on every path.
// Dispatch records for the other replicas and a request served by another
// instance than its pin go through the pool's coord.Coordinator.
//
// The package knows nothing of ext_proc, Envoy or HTTP requests beyond a
// parsed OpenAI body (package extproc is the protocol), and decides no
// route itself (package scheduler does).
package pool
