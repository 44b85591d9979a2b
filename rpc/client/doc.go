// Package client is the Go client of fluss-node: typed helpers over the
// generated Connect clients, speaking Connect proto (binary) by default,
// Connect JSON (WithJSON) or gRPC over h2c (WithGRPC).
//
// Invariants:
//   - Every write carries this client's writer id (random per Client unless
//     WithWriterID) and a fresh, increasing batch sequence. A write is
//     retried only on `unavailable`, with the same writer id and sequence,
//     so the server stores it once however many times it is sent.
//   - Retries back off (Retry: Base doubling up to Max, at most Attempts
//     tries) and stop as soon as the context ends.
//   - Admin writes (create/drop) are not retried: a lost reply would turn
//     a success into already_exists / not_found.
//   - The default HTTP/1.1 client hands small request bodies (up to 64 KiB)
//     to net/http as in-memory readers, so headers and body leave in one
//     write; the bytes sent are unchanged.
//   - Leader routing is not done yet: every call goes to the one base URL,
//     which forwards to the bucket leader.
package client
