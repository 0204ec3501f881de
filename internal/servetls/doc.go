// Package servetls builds the TLS configuration of the ext_proc listener
// from grpc.tls: a self-signed certificate made at start, or a certificate
// and key read from files and re-read when they change, and optionally a
// client CA for mutual TLS.
package servetls
