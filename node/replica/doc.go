// Package replica runs one bucket replica of a log table: one hashicorp/raft
// group whose raft.LogStore (and StableStore) is the bucket's data log
// (logstore.Log), so every record is written once.
//
// # Entry format
//
// The Data of every raft.LogCommand entry of a bucket group is
//
//	command u8 | payload
//
// with command 1 (append): the payload is one or more concatenated record
// batches (logstore/record/FORMAT.md) with consecutive base offsets (the
// base offset of batch i+1 is base i + count i) and one commit timestamp.
// The batches of one Append request are adjacent inside one entry and carry
// the request's writer id and batch sequence in their headers; a request is
// never split across entries. Noop, configuration and barrier entries carry
// no records. EntryOffsets is the logstore.OffsetFunc that reads an entry's
// range from the batch headers (first base offset, total count, max commit
// timestamp). Unknown command bytes are reserved for later formats and
// make the FSM panic on a binary that does not know them (gated by the
// cluster feature level).
//
// # Primary-key buckets
//
// With Config.PK set the entries are the same, and their batches are the
// changelog the leader computed (attribute bit 2; Arrow body = the table's
// columns + `_change_type` TINYINT: 0 +I, 1 -U, 2 +U, 3 -D). A write that
// changed nothing is a zero-record batch that only carries its writer id
// and sequence. Every replica's FSM also applies each entry's changelog to
// its kvstore.Replica with the entry's raft index (skipped when the store
// already holds that index). Append is refused; Write merges through the
// proposer (dedupe first, then merge against KV state + pre-write buffer,
// then offsets); Lookup and PrefixScan are leader reads after the barrier
// and a coalesced VerifyLeader. Each changelog batch's header names the
// table schema version it was merged with, and the FSM applies it with
// that version, waiting for the node's catalog to hold it (pkschema.go).
//
// # Snapshot format
//
// A snapshot holds no data, only (little-endian)
//
//	"FRS1" | next offset i64 | log start i64 | max commit ts i64 |
//	applied raft index u64 | last writer sweep ts i64 | writers u32 |
//	per writer, ascending id: id i64 | last ts i64 | n u8 (<= WriterWindow) |
//	n × (seq i32 | base i64 | count i32) | CRC32-C u32 of all bytes before
//
// The log start is the local log's start when the snapshot was taken
// (informational: retention is local to each replica). A snapshot sent to
// another replica has the sender's log section in front (snapshot.go).
//
// A follower too far behind catches up from a raft snapshot; the section
// gives it the leader's local log with it, so it never holds less than the
// leader does.
//
// A PK replica's snapshot is "FPK1" | u32 LE length | the snapshot above |
// the KV stream (kvstore/FORMAT.md "Snapshot"). Restore replaces the KV
// state with the stream unless the store already holds the snapshot's
// raft index or a later one.
//
// # Invariants
//
//   - Offsets are dense and deterministic: the leader stamps base offsets
//     consecutively from its proposed next offset, which after every
//     leadership gain (and after any failed entry) is re-read from the FSM
//     after a raft Barrier, i.e. after every earlier entry is applied. Apply
//     checks each batch's base offset against the next offset and panics on
//     a mismatch rather than diverge.
//   - Apply is deterministic: no clocks (time is the commit timestamp in the
//     batches; writer expiry runs on it), no map-order output (snapshots
//     sort writers).
//   - High watermark = next offset after the last applied entry. Fetch never
//     returns records at or beyond it; an Append is acknowledged only after
//     its entry is committed (fsynced by a quorum) and applied.
//   - Idempotence is decided in one place, the leader's proposer, against a
//     writer view = applied writer table + in-flight requests: a (writer,
//     seq) that is applied returns the stored result, one in flight waits
//     for the original's result, one older than the kept window fails with
//     ErrOutOfOrderSequence. Nothing is proposed twice by one leader, and a
//     new leader starts from the applied table, so a client retry after a
//     leader change is stored once.
//   - Raft never compacts the log (TrailingLogs = MaxUint64). Retention
//     deletes whole segments, never beyond the last snapshot index.
//
// # Goroutines
//
// Per replica: raft's own; a monitor that follows LeaderCh; while leading, a
// term goroutine (barrier, then the proposer loop) and its completion
// goroutine, which waits for entries in order so the proposer can build the
// next entry while one is being fsynced. Close joins all of them.
//
// Locks: Replica.mu, term.mu and FSM.mu are never held together.
package replica
