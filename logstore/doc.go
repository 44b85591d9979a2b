// Package logstore is a bucket replica's segmented, append-only log. It is
// at once the replica's raft.LogStore (and StableStore) and its data log:
// each raft entry is written once, as a frame in a segment file (see
// FORMAT.md), and the fetch path reads record batches from the same
// frames by data offset.
//
// Invariants:
//   - Raft indexes in the log are contiguous from FirstIndex to LastIndex;
//     StoreLogs rejects a gap. After everything was deleted (Reset, or
//     raft removing all entries after it installed a snapshot, which it
//     does when given the log as a MonotonicLogStore) the next entry may
//     have any index and data offset.
//   - Data offsets are dense: an entry with records starts at the previous
//     NextOffset. Offsets come from Options.OffsetFunc and are written into
//     the frame, so recovery never decodes record batches.
//   - With SyncAlways an entry is visible (GetLog, Read, LastIndex) only
//     after it is durable. A frame that was never synced may be lost in a
//     crash; recovery truncates an invalid tail of the last segment and
//     reports any invalid frame elsewhere as *CorruptionError.
//   - The .log files are the truth; .index/.timeindex are caches rebuilt
//     when missing or inconsistent. GetLog serves the newest few small
//     entries from the entries StoreLogs was given (raft reads entries
//     back right after storing them); a DeleteRange forgets them.
//   - Read never visits an entry at or past the caller's endOffset (the
//     high watermark), so uncommitted data is never served.
//   - Only prefixes (compaction, retention) and suffixes (conflict
//     truncation) are deleted; a persisted logical first index keeps
//     GetLog below FirstIndex failing with raft.ErrLogNotFound.
//
// Concurrency: mutators (StoreLogs, DeleteRange, DeleteBefore, Close) are
// serialized by an append mutex and publish new state under a RWMutex
// that readers (GetLog, Read, OffsetForTimestamp) hold shared while they
// pread. One Syncer per node group-commits the syncs of all logs: a round
// with two or more files is one syncfs(2) per filesystem by default
// (DefaultSyncfsThreshold, measured in BenchmarkSyncer).
//
// Index files: the active segment's index entries live in memory; its
// .index/.timeindex are written when it is sealed (synced then) or the log
// is closed, and rewritten after recovery or tail truncation. Recovery
// scans the last segment in full, so it never trusts them, and appends
// write nothing but the frames (a sync round flushes only segment data).
package logstore
