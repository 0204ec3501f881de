// Package statepb is the generated Go code of proto/state.proto: the wire
// format of what dualmap replicas exchange through Redis (dispatch batches,
// each replica's state and the key-depth table). Regenerate it with proto/generate.sh; do not
// edit state.pb.go by hand.
//
// It is for encoding and decoding only; the protocol that uses these
// messages is described in package state.
package statepb
