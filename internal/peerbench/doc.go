// Package peerbench is the logic of the peer benchmark (make bench-peer,
// e2e TestPeerBench): the workloads it replays, the files it writes for an
// outside benchmark client, the engines' prefix-cache hit rate read from
// their vLLM-format /metrics, the capacity a rate ramp measures and the
// rates derived from it, and the report. It starts no process: the e2e
// harness runs the stack and feeds it what it measured.
package peerbench
