// Package kvstore holds the primary-key state of PK tables: one badger DB
// per node shared by every bucket replica, the merge engines that turn
// incoming rows into a changelog, and the leader's pre-write buffer.
//
// Write path (DESIGN §6): the bucket leader looks up the current row
// (PreWriteBuffer.LookupIn over a Reader, one badger read view per
// request), runs Merger.Upsert/Delete, records the result in the
// PreWriteBuffer tagged with the offset after the proposal's changelog and
// proposes the emitted changelog (+I -U +U -D) as an Arrow batch
// (ChangelogRecord). Every replica's FSM calls Replica.Apply with that
// changelog (ChangesFromRecord): plain puts and deletes, no merge work.
//
// Invariants:
//   - Keys: 8-byte replica prefix | namespace byte | encoded primary key.
//     The key encoding is order-preserving and self-delimiting, with the
//     bucket-key columns first, so all rows of one bucket-key value are
//     adjacent and found with one seek (FORMAT.md).
//   - Apply writes a batch and its Raft index in one badger txn: the stored
//     rows always equal the changelog applied up to AppliedIndex. A batch at
//     an index <= AppliedIndex is skipped, so Raft replay is idempotent.
//   - Apply is deterministic; Merger is pure (no clock, no randomness, no map
//     iteration in its output), so replaying the changelog from empty
//     reproduces the store byte for byte.
//   - A Merger never emits a change for an error; the returned row is then
//     the unchanged old row.
//   - Restore verifies the whole stream (CRC32C) before touching the store;
//     the applied index is written last, so an interrupted Restore or Drop
//     reads AppliedIndex()==0.
//   - Decoders (DecodeRow, DecodeKey, snapshot streams) return ErrCorrupt on
//     bad input and never panic.
//
// Concurrency: Store and Codec and Merger are safe for concurrent use.
// Per replica, Apply/Restore/Drop come from the replica's one FSM goroutine;
// Get/PrefixScan/Snapshot/AppliedIndex may run concurrently (badger read
// txns). PreWriteBuffer is internally locked.
//
// Not here (the caller's job): idempotence of retried producer batches
// (the writer table, DESIGN §6 trap) and the Raft barrier on leadership change.
package kvstore
