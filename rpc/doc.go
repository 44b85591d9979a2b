// Package rpc serves the client API of fluss-node (API.md): the Connect
// AdminService, WriteService and ReadService over a Backend, plus /healthz,
// /readyz and /metrics (NewHandler). It translates proto ⇄ domain,
// validates input, and maps domain errors to Connect codes in one function
// (toConnectError, errors.go).
//
// Invariants:
//   - Every request is fully decoded and validated before the Backend sees a
//     write: malformed JSON or Arrow, wrong types, NULL in NOT NULL, unknown
//     tables or columns, bad filters and over-limit sizes fail with
//     invalid_argument / not_found / resource_exhausted and store nothing.
//   - JSON rows are converted to Arrow and compressed with the table's
//     table.log.arrow.compression.type (default ZSTD); Arrow record batches a
//     client sends are stored byte for byte (no recompression), after being
//     decoded once to validate them and compute stats. Splitting an Arrow
//     stream by bucket key re-encodes it: clients should send one bucket's
//     rows per stream.
//   - Fetch never returns a row below the requested offset; nextOffset is the
//     offset after the last row examined (rows a filter drops advance it), so
//     a reader that always continues from nextOffset sees every matching row
//     once. ARROW responses are complete IPC streams (schema, batches, EOS);
//     whole batches without a filter are projected at buffer level, never
//     decompressed.
//   - Limits (Limits) bound request bytes, batch bytes, fetch bytes, rows per
//     request and long-poll waits; exceeding one is resource_exhausted with
//     the limit's name in the message.
//   - The JSON codec (JSONCodec) carries json_rows fields inline as JSON
//     arrays; Connect proto and gRPC carry the same text in the bytes field.
//   - Handlers never panic on input; a Backend error that is not a known
//     sentinel is logged and answered as internal.
//   - Scan runs one goroutine per bucket; only the handler goroutine sends
//     on the stream, and all goroutines end before Scan returns.
package rpc
