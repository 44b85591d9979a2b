// Package peer is the node-to-node transport of fluss-node: one TCP listener per node carrying
// hashicorp/yamux sessions, shared by every Raft group of the node (metadata and buckets) and by
// node-to-node calls (request forwarding). The wire format is in WIRE.md.
//
// Invariants:
//   - One Mux per node. A node opens streams only on sessions it dialled (one per remote address,
//     dialled lazily, re-dialled with backoff after failure) and accepts streams only on sessions
//     it accepted; a node pair therefore has up to two sessions, one per direction.
//   - Every stream starts with a versioned header naming its kind (raft or call) and its group or
//     handler name; an acceptor that does not know the version answers an error frame and closes.
//   - Frames are length-prefixed and bounded by Options.MaxFrameSize on both sides; a bad frame
//     closes its stream, never the process (request paths do not panic).
//   - Requests on one stream are answered in order. Unary Raft RPCs reuse idle streams per
//     (peer, group) (at most Options.MaxIdleStreams); AppendEntriesPipeline owns one stream;
//     InstallSnapshot streams its data after the request frame and then closes the stream.
//   - An RPC for a group not registered on the remote returns an error wrapping ErrUnknownGroup;
//     a call to an unregistered handler returns ErrUnknownHandler.
//   - Idle streams hold no codec state or buffers (both are pooled per RPC); yamux allocates a
//     stream's receive buffer only when data arrives and Shrink releases it after each RPC.
//   - A yamux data frame reaches the kernel as one write of header and body; other frames are
//     taken at once, never held for later traffic; frames handed over while a write is in the
//     kernel go out together in the next one (sendconn.go).
//   - Heartbeats of all groups bound for one node travel in shared batch frames (heartbeat.go).
//     A group with CacheHeartbeats on answers raft's heartbeat to a follower from that follower's
//     acknowledgement of the same term while it is younger than the cache age (hbcache.go);
//     FreshHeartbeat always asks the follower, which is what linearizable reads must use.
//   - Close of a Transport unregisters its group only; Close of the Mux closes every session and
//     waits for every goroutine the Mux started.
//
// Goroutines: the accept loop, one per inbound session (stream accept), one per open inbound
// stream (serving requests in order), one per pipeline (reading answers), plus yamux's own
// three per session (recv, send, keepalive), and a session's flush goroutine while it has bytes
// pending (sendconn.go).
package peer
