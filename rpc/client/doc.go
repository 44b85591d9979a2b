// Package client is the Go client of fluss-node: typed helpers over the
// generated Connect clients, speaking Connect proto (binary) by default,
// Connect JSON (WithJSON) or gRPC over h2c (WithGRPC).
//
// Invariants:
//   - Every write carries a writer id of this client and that writer's next
//     batch sequence. A write is retried only on `unavailable` or a
//     connection that broke under it (see retryable), with the
//     same writer id and sequence, so the server stores it once however
//     many times it is sent. No writer id has two writes out at once (a
//     bucket refuses a writer's sequence older than the newest it holds,
//     and concurrent requests race): a write takes an idle writer id of the
//     client, or a new random one. A client used by one goroutine has one
//     writer id (random unless WithWriterID).
//   - Retries back off (Retry: Base doubling up to Max, at most Attempts
//     tries) and stop as soon as the context ends.
//   - Admin writes (create/drop) are not retried: a lost reply would turn
//     a success into already_exists / not_found.
//   - The default HTTP/1.1 client writes each unary call and reads its
//     answer on the calling goroutine, over keep-alive connections (headers
//     and a small body leave in one write); streams and anything but plain
//     HTTP go through net/http's Transport.
//   - The base URL may list several servers, comma separated: calls go to
//     the one that answered last until it fails. One whose connection
//     cannot be made is passed over within the call; one that answers
//     `unavailable` by the calls after it, so a retry goes elsewhere and a
//     call that is not retried is still sent only once (see seedList).
//   - Without WithRouting every call goes to the one base URL, which
//     forwards to the bucket leader. With it, bucket-addressed calls
//     (append with a bucket, fetch, limit scan of a bucket) go to the leader
//     learned from GetTableLayout + DescribeCluster, cached per table,
//     reloaded when a call fails with `unavailable` and periodically, and to
//     the base URL whenever no leader is known. Routing never changes a
//     result: a retry after a routing failure carries the same writer id and
//     batch sequence as the first attempt.
//   - Primary-key writes (Upsert, Delete) follow the same writer id / batch
//     sequence and retry rules as Append; all reads retry `unavailable`,
//     a Scan stream only until its first message reached the caller (a
//     retry after that would hand over rows twice) unless it follows: a
//     following scan resolves every bucket's start, keeps each bucket's
//     next offset, and when its stream breaks resumes from there (not for
//     a scan of every partition of a partitioned table).
//   - A Lookuper (NewLookuper) batches single-key lookups of many
//     goroutines: those that arrive while its request slots are taken go
//     out together in the next request, as Fluss's client batches lookups.
//     A lone lookup goes out at once; after answering a request, a slot
//     waits up to a linger (1 ms) for as many lookups as it answered, so
//     goroutines looking up in a loop share the next request. It never
//     changes an answer, and a key the server refuses fails only its own
//     lookup (the batch is re-sent key by key).
//   - An Appender (NewAppender) batches single-row appends of many
//     goroutines the same way; each request is one write of its own writer
//     id and sequence, and a row the server refuses fails only its own
//     Append. With routing it names each request's bucket in turn (tables
//     without a bucket key), so requests go straight to the leaders.
package client
